package deps

import (
	_ "github.com/anthropics/anthropic-sdk-go"
	_ "github.com/cloudevents/sdk-go/v2"
	_ "github.com/invopop/jsonschema"
	_ "github.com/nats-io/nats-server/v2/server"
	_ "github.com/nats-io/nats.go"
	_ "github.com/nats-io/nats.go/jetstream"
	_ "github.com/nats-io/nats.go/micro"
	_ "github.com/openai/openai-go/v3"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "go.uber.org/goleak"
	_ "google.golang.org/genai"
	_ "gopkg.in/yaml.v3"
)
