"""Cases and vendor configs on disk, read into typed specs; the images that run them."""
