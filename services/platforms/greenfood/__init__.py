"""Category D `greenfood.order`: the GREENFOOD platform's orders, inventory, prices and stock."""
