// The AI SDK's own client path (useChat's): DefaultChatTransport posts the messages, reads the SSE stream and
// validates every chunk (uiMessageChunkSchema); readUIMessageStream builds the assistant message. One JSON line per
// scenario: the message's parts, its metadata and the errors the stream reported; then the conversation the
// client built is sent back with one more user message, for the server to read.
import { DefaultChatTransport, readUIMessageStream } from 'ai';

const [base, ...scenarios] = process.argv.slice(2);
const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0]).toString('base64');
const asked = {
  id: 'u1',
  role: 'user',
  parts: [
    { type: 'text', text: 'Total of A1?' },
    { type: 'file', mediaType: 'image/png', filename: 'a.png', url: `data:image/png;base64,${png}` },
  ],
};

async function send(name, messages) {
  const transport = new DefaultChatTransport({ api: `${base}/chat/${name}` });
  const chunks = await transport.sendMessages({ chatId: 'chat-1', messages, trigger: 'submit-message' });
  const errors = [];
  let message;
  for await (const m of readUIMessageStream({ stream: chunks, onError: (e) => errors.push(String(e)) })) message = m;
  return { message, errors };
}

for (const name of scenarios) {
  try {
    const { message, errors } = await send(name, [asked]);
    const parts = message.parts.map((p) => ({ type: p.type, state: p.state, text: p.text, output: p.output, errorText: p.errorText }));
    const next = await send('text', [asked, message, { id: 'u2', role: 'user', parts: [{ type: 'text', text: 'Thanks' }] }]);
    console.log(JSON.stringify({ name, parts, metadata: message.metadata, errors, next: next.message.parts.map((p) => p.type) }));
  } catch (error) {
    console.log(JSON.stringify({ name, thrown: String(error) }));
  }
}
