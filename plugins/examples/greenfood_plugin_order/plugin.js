// greenfood.plugin_order: greenfood.order rebuilt over the greenfood internal API (seed 002
// §10.1: {product_id, qty} -> {order_id, status: "created"}). One internal call per order:
// category D tools are rate-limited to a call at a time per caller, the plugin included.
function invoke(args, context) {
  let order;
  try {
    order = internal("greenfood", "greenfood.order", {
      op: "create_order", product_id: args.product_id, qty: args.qty,
    });
  } catch (e) {
    throw new Error(`GREENFOOD refused the order (${e.code}): ${e.message}`);
  }
  return { order_id: order.order_id, status: order.status, product_id: order.product_id, qty: order.qty };
}
