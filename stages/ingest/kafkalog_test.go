package ingest

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestKafkaLoggerLevels: kafka-go's Logger writes at debug, so a logger at the default level
// (info) writes none of its lines (they were 163 of 179 lines of one run); its ErrorLogger
// writes at warn, at every level up to warn.
func TestKafkaLoggerLevels(t *testing.T) {
	for _, lv := range []zerolog.Level{zerolog.DebugLevel, zerolog.InfoLevel, zerolog.WarnLevel, zerolog.ErrorLevel} {
		var buf bytes.Buffer
		log := zerolog.New(&buf).Level(lv)
		kafkaDebugLogger(log).Printf("entering loop for consumer group, %v", "outlierd")
		debugLine := buf.String()
		buf.Reset()
		kafkaErrorLogger(log).Printf("failed to connect to %s", "localhost:9092")
		errorLine := buf.String()

		if wantDebug := lv <= zerolog.DebugLevel; (debugLine != "") != wantDebug {
			t.Errorf("level %v: kafka-go Logger wrote %q, want a line: %v", lv, debugLine, wantDebug)
		}
		if debugLine != "" && (!strings.Contains(debugLine, `"level":"debug"`) || !strings.Contains(debugLine, "entering loop for consumer group, outlierd")) {
			t.Errorf("kafka-go Logger line %q, want the message at debug", debugLine)
		}
		if wantWarn := lv <= zerolog.WarnLevel; (errorLine != "") != wantWarn {
			t.Errorf("level %v: kafka-go ErrorLogger wrote %q, want a line: %v", lv, errorLine, wantWarn)
		}
		if errorLine != "" && (!strings.Contains(errorLine, `"level":"warn"`) || !strings.Contains(errorLine, "failed to connect to localhost:9092")) {
			t.Errorf("kafka-go ErrorLogger line %q, want the message at warn", errorLine)
		}
	}
}
