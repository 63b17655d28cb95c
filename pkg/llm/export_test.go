package llm

// PumpBuffer is how many events the pump reads ahead of the consumer.
const PumpBuffer = pumpBuffer
