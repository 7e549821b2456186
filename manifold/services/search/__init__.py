"""Search: the query service and the index kept up to date."""
