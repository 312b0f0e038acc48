/*
 * A transactional producer over the real RocketMQ 4.9.8 client (TransactionMQProducer), for the broker tests.
 *
 *   TxProducer NAMESRV TOPIC GROUP PLAN [--on-check STATE] [--checks K] [--timeout S]
 *
 * PLAN has one letter per message i (body "tx-<i>", key "tx-<i>", user property "plan" = the letter):
 *   C  the local transaction commits             R  it rolls back
 *   U  it is UNKNOWN; a check answers COMMIT     X  it is UNKNOWN; a check answers ROLLBACK
 *   N  it is UNKNOWN, and so is every check
 * --on-check STATE answers every check with STATE (COMMIT_MESSAGE, ROLLBACK_MESSAGE or UNKNOW) whatever
 * the plan; with an empty PLAN the producer only answers checks (of half messages an earlier run left).
 * After sending, it waits until K checks were answered with a state other than UNKNOW (default: the
 * number of U and X letters) or S seconds passed (default 60), and leaves 1 s for the last answers.
 * Prints one JSON line per message sent and per check, then {"summary": ...}. Exit code 0 when every
 * send succeeded and the checks came, else 3.
 */

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import com.alibaba.fastjson.JSON;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public class TxProducer {

    public static void main(String[] args) throws Exception {
        List<String> positional = new ArrayList<>();
        Map<String, String> options = new LinkedHashMap<>();
        for (int i = 0; i < args.length; i++) {
            if (args[i].startsWith("--")) options.put(args[i].substring(2), args[++i]);
            else positional.add(args[i]);
        }
        if (positional.size() != 4) {
            System.err.println("usage: TxProducer NAMESRV TOPIC GROUP PLAN [--on-check STATE] [--checks K] [--timeout S]");
            System.exit(2);
        }
        System.exit(run(positional.get(0), positional.get(1), positional.get(2), positional.get(3), options));
    }

    static LocalTransactionState local(char letter) {
        switch (letter) {
            case 'C': return LocalTransactionState.COMMIT_MESSAGE;
            case 'R': return LocalTransactionState.ROLLBACK_MESSAGE;
            case 'U': case 'X': case 'N': return LocalTransactionState.UNKNOW;
            default: throw new IllegalArgumentException("plan letter " + letter + " is not one of C R U X N");
        }
    }

    static LocalTransactionState onCheck(String letter) {
        switch (letter) {
            case "U": return LocalTransactionState.COMMIT_MESSAGE;
            case "X": return LocalTransactionState.ROLLBACK_MESSAGE;
            default: return LocalTransactionState.UNKNOW;
        }
    }

    static synchronized void print(Map<String, Object> line) {
        System.out.println(JSON.toJSONString(line));
        System.out.flush();
    }

    static int run(String ns, String topic, String group, String plan, Map<String, String> options) throws Exception {
        String forced = options.get("on-check");
        int expectedChecks = Integer.parseInt(options.getOrDefault("checks",
            String.valueOf(plan.replaceAll("[^UX]", "").length())));
        int timeout = Integer.parseInt(options.getOrDefault("timeout", "60"));
        AtomicInteger answered = new AtomicInteger();
        CountDownLatch checksDone = new CountDownLatch(expectedChecks);

        TransactionMQProducer producer = new TransactionMQProducer(group);
        producer.setNamesrvAddr(ns);
        producer.setVipChannelEnabled(false);
        producer.setInstanceName("tx-" + ProcessHandle.current().pid());
        producer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return local(msg.getUserProperty("plan").charAt(0));
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                LocalTransactionState state = forced != null ? LocalTransactionState.valueOf(forced)
                    : onCheck(String.valueOf(msg.getUserProperty("plan")));
                Map<String, Object> line = new LinkedHashMap<>();
                line.put("check", new String(msg.getBody(), StandardCharsets.UTF_8));
                line.put("answer", state.name());
                line.put("topic", msg.getTopic());
                line.put("queueId", msg.getQueueId());
                line.put("msgId", msg.getMsgId());
                line.put("transactionId", msg.getTransactionId());
                line.put("properties", msg.getProperties());
                print(line);
                if (state != LocalTransactionState.UNKNOW) {
                    answered.incrementAndGet();
                    checksDone.countDown();
                }
                return state;
            }
        });
        producer.start();
        int failed = 0;
        try {
            if (plan.isEmpty()) producer.fetchPublishMessageQueues(topic);  // learn the broker: its heartbeat follows
            for (int i = 0; i < plan.length(); i++) {
                String name = "tx-" + i;
                Message msg = new Message(topic, "TagT", name, name.getBytes(StandardCharsets.UTF_8));
                msg.putUserProperty("plan", String.valueOf(plan.charAt(i)));
                Map<String, Object> line = new LinkedHashMap<>();
                line.put("i", i);
                line.put("plan", String.valueOf(plan.charAt(i)));
                try {
                    TransactionSendResult result = producer.sendMessageInTransaction(msg, null);
                    line.put("status", result.getSendStatus().name());
                    line.put("local", result.getLocalTransactionState().name());
                    line.put("msgId", result.getMsgId());
                    line.put("offsetMsgId", result.getOffsetMsgId());
                    line.put("queueId", result.getMessageQueue().getQueueId());
                    line.put("queueOffset", result.getQueueOffset());
                    if (result.getSendStatus() != SendStatus.SEND_OK) failed++;
                } catch (Exception e) {
                    line.put("error", e.toString());
                    failed++;
                }
                print(line);
            }
            boolean checked = checksDone.await(timeout, TimeUnit.SECONDS);
            Thread.sleep(1000);  // the last check's END_TRANSACTION is oneway: let it leave
            Map<String, Object> summary = new LinkedHashMap<>();
            summary.put("sent", plan.length() - failed);
            summary.put("failed", failed);
            summary.put("checks_answered", answered.get());
            summary.put("checks_expected", expectedChecks);
            print(Map.of("summary", summary));
            return failed == 0 && checked ? 0 : 3;
        } finally {
            producer.shutdown();
        }
    }
}
