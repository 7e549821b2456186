"""Protocol front ends over the file services: each parses its protocol's requests,
calls ``GuardedOps`` and renders the answer; none checks permissions itself."""
