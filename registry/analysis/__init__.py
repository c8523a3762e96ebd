"""The statistics and the documents built from them: reports, comparisons, summaries, plans."""
