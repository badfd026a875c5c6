// The AG-UI client: HttpAgent posts a RunAgentInput, parses the SSE stream, checks the protocol's order
// (verifyEvents: it throws on a violation) and applies the events to its messages. One JSON line per scenario:
// the messages it built, the run's result and the error it reported; then those messages are sent back with one
// more user message, for the server to read.
import { HttpAgent } from '@ag-ui/client';

const [base, ...scenarios] = process.argv.slice(2);
const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0]).toString('base64');

for (const name of scenarios) {
  const agent = new HttpAgent({ url: `${base}/agui/${name}`, threadId: 'thread-1' });
  agent.messages = [
    { id: 's', role: 'system', content: 'Be brief.' },
    {
      id: 'u1',
      role: 'user',
      content: [
        { type: 'text', text: 'Total of A1?' },
        { type: 'image', source: { type: 'data', value: png, mimeType: 'image/png' } },
      ],
    },
  ];
  const errors = [];
  try {
    const run = await agent.runAgent({ runId: `run-${name}` }, { onRunErrorEvent: ({ event }) => { errors.push(event.code); } });
    const messages = agent.messages.map((m) => ({ role: m.role, calls: (m.toolCalls ?? []).map((c) => c.function.name), sub: m.subagentRunId ?? null }));
    const next = new HttpAgent({ url: `${base}/agui/text`, threadId: 'thread-1', initialMessages: [...agent.messages, { id: 'u2', role: 'user', content: 'Thanks' }] });
    await next.runAgent({ runId: `run-${name}-next` });
    console.log(JSON.stringify({ name, messages, result: run.result ?? null, errors, next: next.messages.at(-1).content }));
  } catch (error) {
    console.log(JSON.stringify({ name, thrown: String(error) }));
  }
}
