// A service in another language scheduling with duetime's SQL functions: the order row and
// its reminder commit together, or neither does. Run with DATABASE_URL and DUETIME_SCHEMA set
// (and the `pg` package installed: npm install pg).
const { Client } = require("pg");

async function main() {
  const client = new Client({ connectionString: process.env.DATABASE_URL });
  await client.connect();
  const schema = process.env.DUETIME_SCHEMA || "duetime";
  await client.query(`SET search_path = "${schema}"`);
  const orderId = process.argv[2] || "1001";
  try {
    await client.query("BEGIN");
    // ... the service's own writes here, in the same transaction ...
    const reminder = await client.query(
      `SELECT * FROM schedule($1, 'order.reminder', $2::jsonb,
                              delay => interval '2 days', key => $3)`,
      ["shop", JSON.stringify({ order: orderId }), `reminder-${orderId}`],
    );
    const paid = await client.query(
      "SELECT * FROM emit($1, 'order.placed', $2::jsonb)",
      ["shop", JSON.stringify({ order: orderId })],
    );
    if (process.argv[3] === "rollback") {
      await client.query("ROLLBACK");
    } else {
      await client.query("COMMIT");
    }
    console.log(JSON.stringify({ reminder: reminder.rows[0], placed: paid.rows[0] }));
  } catch (error) {
    await client.query("ROLLBACK");
    // duetime's errors name the field: error.column, and error.code is the SQLSTATE
    console.error(JSON.stringify({ code: error.code, field: error.column, message: error.message }));
    process.exitCode = 1;
  } finally {
    await client.end();
  }
}

main();
