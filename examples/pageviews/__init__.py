"""Page views per member: the quick-start job (the page-view counting story of Samza's docs)."""
