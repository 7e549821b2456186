"""The Rclone driver: a storage on any rclone remote, through one rclone process the
server runs and watches itself (``process``)."""
