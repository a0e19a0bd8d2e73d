"""HTTP middlewares, one concept each; their order is declared once in proxy.web.app."""
