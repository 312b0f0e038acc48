"""RocketMQ 5's gRPC endpoint (`apache.rocketmq.v2.MessagingService`) over the same store as the
remoting broker: `rocketstore serve STORE --grpc HOST:PORT`. See docs/broker.md, "gRPC endpoint"."""
