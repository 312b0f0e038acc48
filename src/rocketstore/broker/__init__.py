"""The Broker and NameServer roles over a MessageStore, speaking RocketMQ's remoting protocol (asyncio).

Layer: an adapter above `store`, like `cli` and `spark`. `server` is the only module that opens
sockets; handlers are thin calls into the `MessageStore` public API.
"""
