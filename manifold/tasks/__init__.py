"""Background tasks: the task service and the kinds it runs (copies, uploads)."""
