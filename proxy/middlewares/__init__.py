"""HTTP middlewares, one concept each; their order is declared once in proxy.app."""
