// A support agent on the official openai npm package, written as its README shows:
// `new OpenAI()` reads OPENAI_API_KEY (and OPENAI_BASE_URL) from the environment.
//
// `assay init --framework node` wrote it as a start: replace it with yours. It knows
// nothing of assay. `assay run evals` runs it once per trial (the exec: target): the
// customer's message arrives as JSON on stdin, the answer leaves as JSON on stdout,
// and its calls to the model go through assay's recording proxy on loopback.
//
// On its own:  echo '"Where is my order A-1?"' | node node_agent.mjs
import OpenAI from "openai";

const client = new OpenAI();
const ORDERS = { "A-1": "shipped", "A-2": "lost" };
const INSTRUCTIONS =
  "You help customers with their orders. Look an order up before you act on it. " +
  "Refund only a lost order, and ask the customer with ask_user before you refund it. " +
  "If the customer gives no order number, ask for it in your answer.";

const run = {
  lookup_order: ({ order_id }) => {
    if (ORDERS[order_id] === "shipped") return `Order ${order_id} has shipped: it arrives on Friday.`;
    if (ORDERS[order_id] === "lost") return `Order ${order_id} was lost in transit.`;
    return `There is no order ${order_id}.`;
  },
  refund_order: ({ order_id }) => {
    if (ORDERS[order_id] !== "lost") {
      return `Refused: only a lost order can be refunded, and ${order_id} is not lost.`;
    }
    return `Order ${order_id} is refunded: 40.00 EUR, back on the card in 3 days.`;
  },
  // In production this asks the customer in your chat; here the customer agrees.
  ask_user: () => "Yes, please go ahead.",
};

const tool = (name, description, field) => ({
  type: "function",
  function: {
    name,
    description,
    parameters: { type: "object", properties: { [field]: { type: "string" } }, required: [field] },
  },
});
const tools = [
  tool("lookup_order", "Look an order up by its number.", "order_id"),
  tool("refund_order", "Refund an order. Only a lost order can be refunded.", "order_id"),
  tool("ask_user", "Ask the customer a question and wait for the answer.", "question"),
];

let input = "";
for await (const chunk of process.stdin) input += chunk;
const messages = [
  { role: "system", content: INSTRUCTIONS },
  { role: "user", content: JSON.parse(input) },
];
for (;;) {
  const completion = await client.chat.completions.create({ model: "gpt-4.1-mini", messages, tools });
  const message = completion.choices[0].message;
  if (!message.tool_calls?.length) {
    console.log(JSON.stringify(message.content));
    break;
  }
  messages.push(message);
  for (const call of message.tool_calls) {
    const result = run[call.function.name](JSON.parse(call.function.arguments));
    messages.push({ role: "tool", tool_call_id: call.id, content: result });
  }
}
