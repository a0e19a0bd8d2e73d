"""HTTP hygiene: which Host and Origin values are served, response headers, and the server's
connection limits and read timeouts."""
