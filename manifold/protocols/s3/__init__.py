"""Manifold's tree served as S3 buckets on a port of its own (AList's S3 server).

app.py        the ASGI app: authentication, routing, error rendering
sigv4.py      Signature Version 4 checks; aws-chunked bodies
buckets.py    the ``s3_buckets`` setting; a key to a path, never outside its bucket
listing.py    keys in S3's order, walking the tree only as far as a page needs
listings.py   bucket requests (lists, DeleteObjects)
objects.py    object requests (GET, HEAD, PUT, DELETE)
copies.py     CopyObject and UploadPartCopy
conditions.py If-Match and the other conditions of reads, writes and copies' sources
kept.py       what an object keeps besides its bytes (metadata, a multipart ETag)
uploads.py    multipart requests, over ``multipart.py``'s store (swept when idle)
errors.py     S3's error codes and the table from Manifold's errors
xml.py        S3's XML documents
"""
