// A paused run answered through the official clients, against the served app: AG-UI's HttpAgent (verifyEvents
// checks each stream, the interrupt outcome included) keeps the run's interrupts and answers them with resume
// entries (it refuses to run the thread on without them), the payload {"approved": true}; the AI SDK's DefaultChatTransport + readUIMessageStream (each chunk validated) leaves the
// external call at input-available, then the conversation goes back with the call's output set, as
// addToolResult sets it, and the same message goes on. One JSON line per protocol.
import { HttpAgent } from '@ag-ui/client';
import { DefaultChatTransport, readUIMessageStream } from 'ai';

const [base] = process.argv.slice(2);

try {
  const agent = new HttpAgent({ url: `${base}/agui`, threadId: 'thread-approve' });
  agent.messages = [{ id: 'u1', role: 'user', content: 'pay' }];
  await agent.runAgent({ runId: 'run-a1' });
  const waiting = agent.messages.find((m) => m.role === 'assistant' && m.toolCalls?.length).toolCalls[0];
  const answeredBefore = agent.messages.some((m) => m.role === 'tool');
  const interrupts = agent.pendingInterrupts.map((i) => ({ id: i.id, reason: i.reason, toolCallId: i.toolCallId ?? null }));
  const resume = interrupts.map((i) => ({ interruptId: i.id, status: 'resolved', payload: { approved: true } }));
  await agent.runAgent({ runId: 'run-a2', resume });
  const messages = agent.messages.map((m) => ({ role: m.role, content: typeof m.content === 'string' ? m.content : null }));
  console.log(JSON.stringify({ protocol: 'agui', interrupts, waiting: waiting.function.name, answeredBefore, messages, left: agent.pendingInterrupts.length }));
} catch (error) {
  console.log(JSON.stringify({ protocol: 'agui', thrown: String(error) }));
}

async function send(messages, message) {
  const transport = new DefaultChatTransport({ api: `${base}/api/chat` });
  const chunks = await transport.sendMessages({ chatId: 'chat-approve', messages, trigger: 'submit-message' });
  const errors = [];
  let built;
  for await (const m of readUIMessageStream({ message, stream: chunks, onError: (e) => errors.push(String(e)) })) built = m;
  return { message: built, errors };
}

try {
  const asked = { id: 'c1', role: 'user', parts: [{ type: 'text', text: 'which color?' }] };
  const paused = await send([asked]);
  const part = paused.message.parts.find((p) => p.type === 'tool-pick_color');
  const pausedState = part.state;
  const answered = structuredClone(paused.message);
  Object.assign(answered.parts.find((p) => p.type === 'tool-pick_color'), { state: 'output-available', output: { color: 'blue' } });
  const resumed = await send([asked, answered], answered);
  const parts = resumed.message.parts.map((p) => ({ type: p.type, state: p.state ?? null, text: p.text ?? null, output: p.output ?? null, errorText: p.errorText ?? null }));
  console.log(JSON.stringify({ protocol: 'chat', pausedState, pausedMeta: paused.message.metadata, errors: [...paused.errors, ...resumed.errors], parts, meta: resumed.message.metadata }));
} catch (error) {
  console.log(JSON.stringify({ protocol: 'chat', thrown: String(error) }));
}
