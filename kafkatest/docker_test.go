package kafkatest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/modules/kafka"
)

// EnvDocker opts in to TestSuiteOnDocker.
const EnvDocker = "KDELAY_TEST_DOCKER"

// TestSuiteOnDocker is for contributors with Docker: it starts a Kafka
// broker in a container and runs every test of the module against it, as
// KDELAY_TEST_BROKERS does for a broker you run yourself.
//
//	KDELAY_TEST_DOCKER=1 go test ./kafkatest -run TestSuiteOnDocker -v
func TestSuiteOnDocker(t *testing.T) {
	if os.Getenv(EnvBrokers) != "" {
		t.Skip("already running against " + EnvBrokers)
	}
	if os.Getenv(EnvDocker) == "" {
		t.Skip("set " + EnvDocker + "=1 to run the whole suite against Kafka in Docker")
	}
	testcontainers.SkipIfProviderIsNotHealthy(t)

	ctx := context.Background()
	c, err := kafka.Run(ctx, "confluentinc/confluent-local:7.9.0",
		kafka.WithClusterID("kdelay-test"),
		// Like the CI broker: tests create the topics they use, and one
		// relies on a missing target being refused.
		testcontainers.WithEnv(map[string]string{"KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false"}),
	)
	testcontainers.CleanupContainer(t, c)
	if err != nil {
		t.Fatalf("start Kafka container: %v", err)
	}
	brokers, err := c.Brokers(ctx)
	if err != nil {
		t.Fatal(err)
	}

	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("find the module: %v", err)
	}
	cmd := exec.Command("go", "test", "-count=1", "./...")
	cmd.Dir = strings.TrimSpace(string(root))
	cmd.Env = append(os.Environ(), EnvBrokers+"="+strings.Join(brokers, ","))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("suite against Kafka in Docker (%s): %v", strings.Join(brokers, ","), err)
	}
}
