// Drives the official RocketMQ 5 Node.js client (npm rocketmq-client-nodejs 1.0.8) for the gRPC tests.
// Never touches rocketstore; prints one JSON object per line, then a final {"done": ...} line.
//
//   node rmq_node_client.js produce ENDPOINT TOPIC COUNT TAG KEY_PREFIX
//   node rmq_node_client.js consume ENDPOINT TOPIC GROUP TAG EXPECT TIMEOUT_S
// With RMQ_NODE_SSL=1 in the environment the client connects with TLS (sslEnabled).
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');

const sslEnabled = process.env.RMQ_NODE_SSL === '1';

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

async function produce([endpoint, topic, count, tag, keyPrefix]) {
  const producer = new Producer({ endpoints: endpoint, sslEnabled });
  await producer.startup();
  for (let i = 0; i < Number(count); i++) {
    try {
      const receipt = await producer.send({
        topic, tag, keys: [`${keyPrefix}${i}`], body: Buffer.from(`${keyPrefix}-body-${i}`),
      });
      emit({ sent: i, message_id: receipt.messageId });
    } catch (err) {
      emit({ sent: i, error: String(err) });
    }
  }
  await producer.shutdown();
  emit({ done: 'produce' });
}

async function consume([endpoint, topic, group, tag, expect, timeoutS]) {
  const consumer = new SimpleConsumer({
    consumerGroup: group, endpoints: endpoint, subscriptions: new Map().set(topic, tag),
    awaitDuration: 2000, sslEnabled,
  });
  await consumer.startup();
  const deadline = Date.now() + Number(timeoutS) * 1000;
  let got = 0;
  while (got < Number(expect) && Date.now() < deadline) {
    const messages = await consumer.receive(16, 15000);
    for (const m of messages) {
      await consumer.ack(m);
      got += 1;
      emit({
        body: m.body.toString(), size: m.body.length, tag: m.tag, keys: m.keys, topic: m.topic,
        message_id: m.messageId,
      });
    }
  }
  await consumer.shutdown();
  emit({ done: 'consume', count: got });
}

const [mode, ...args] = process.argv.slice(2);
({ produce, consume })[mode](args).then(() => process.exit(0), (err) => {
  emit({ error: String(err && err.stack || err) });
  process.exit(1);
});
