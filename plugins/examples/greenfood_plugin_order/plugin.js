// greenfood.plugin_order: greenfood.order rebuilt over the greenfood internal API. Both forms
// of internal() are used: internal(service, tool, args) and internal(tool, args).
function invoke(args, context) {
  const inventory = internal("greenfood", "greenfood.order", { op: "get_inventory" });
  const product = inventory.products.find((p) => p.product_id === args.product_id);
  if (!product) {
    throw new Error(`unknown product ${args.product_id}`);
  }
  if (product.stock < args.qty) {
    throw new Error(`insufficient stock: ${product.product_id} has ${product.stock}, ${args.qty} requested`);
  }
  const order = internal("greenfood.order", {
    op: "create_order", product_id: args.product_id, qty: args.qty,
  });
  return {
    order_id: order.order_id,
    status: order.status,
    product_id: order.product_id,
    qty: order.qty,
    unit_price: product.price,
    total: Math.round(product.price * order.qty * 100) / 100,
  };
}
