"""Protocol servers beside the JSON API, each a thin adapter over the file services."""
