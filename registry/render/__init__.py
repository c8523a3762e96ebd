"""Text, Markdown, HTML and the static site, from documents; no I/O but the site writer."""
