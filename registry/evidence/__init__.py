"""What counts as evidence, and SQL over it: keys, the evidence rule, selection, queries."""
