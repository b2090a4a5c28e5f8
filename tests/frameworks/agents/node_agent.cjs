// A tool loop written with the official openai npm package, as its README shows: the
// client reads OPENAI_BASE_URL and OPENAI_API_KEY from the environment. Input: JSON on
// stdin (the prompt); output: the answer as JSON on stdout. Run by exec:node node_agent.cjs
// (CommonJS: require finds the package through NODE_PATH, which import does not).
const OpenAI = require("openai");

const ORDERS = { "A-1": "shipped", "A-2": "lost" };
const run = {
  lookup: ({ order }) => `order ${order} is ${ORDERS[order] ?? "unknown"}`,
  refund: ({ order }) => `order ${order} refunded`,
  ask_user: () => "yes, go ahead",
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
  tool("lookup", "Look an order up by its id.", "order"),
  tool("refund", "Refund an order.", "order"),
  tool("ask_user", "Ask the customer a question before acting.", "question"),
];

async function main() {
  let input = "";
  for await (const chunk of process.stdin) input += chunk;
  const client = new OpenAI();
  const messages = [{ role: "user", content: JSON.parse(input) }];
  for (;;) {
    const reply = await client.chat.completions.create({ model: "gpt-4.1", messages, tools });
    const message = reply.choices[0].message;
    if (!message.tool_calls?.length) {
      process.stdout.write(JSON.stringify(message.content) + "\n");
      break;
    }
    messages.push(message);
    for (const call of message.tool_calls) {
      const result = run[call.function.name]?.(JSON.parse(call.function.arguments)) ?? "refused";
      messages.push({ role: "tool", tool_call_id: call.id, content: result });
    }
  }
}

main().catch((error) => {
  process.stderr.write(`${error}\n`);
  process.exit(1);
});
