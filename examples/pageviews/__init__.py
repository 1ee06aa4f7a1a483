"""Page views per member: the quick-start job (seed 003's story)."""
