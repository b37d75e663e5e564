package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
)

// SensorFeatures are the demo stream's features.
var SensorFeatures = []string{"temp", "pressure", "humidity", "vibration", "current", "voltage", "rpm", "flow"}

// sensorModes are the machines' operating modes: idle, normal and high load, with per-feature
// means; sensorSpread is each feature's spread within a mode. Several modes make the density
// multi-modal, which is what micro-clusters and local density are for.
var (
	sensorModes = [3][8]float64{
		{40, 101.0, 35, 0.2, 4, 230, 600, 2},
		{60, 101.3, 40, 0.5, 12, 230, 1500, 8},
		{75, 102.0, 45, 0.9, 20, 228, 2400, 14},
	}
	sensorSpread = [8]float64{1.5, 0.15, 2, 0.05, 0.8, 1.5, 40, 0.6}
)

// SensorStream generates the demo's JSON sensor readings with injected anomalies: a reading
// comes from one of three operating modes with Gaussian noise; an anomaly shifts one to three
// features by 6 to 10 spreads. Every reading carries a per-value measurement uncertainty
// ("<feature>_sd", 2%-10% of the spread) and its ground truth ("anomaly"), which the pipeline
// ignores (it is not a feature) and the demo reads back from the output payload.
type SensorStream struct {
	r           *rand.Rand
	AnomalyRate float64 // fraction of readings that are anomalies
	BadRate     float64 // fraction of messages that are malformed (for the dead-letter topic)
	n           uint64
}

// NewSensorStream makes a stream; anomalyRate and badRate are fractions in [0,1).
func NewSensorStream(seed uint64, anomalyRate, badRate float64) *SensorStream {
	return &SensorStream{r: newRand(seed), AnomalyRate: anomalyRate, BadRate: badRate}
}

// Next returns the next message's key and value, and whether it is an anomaly or malformed.
func (s *SensorStream) Next() (key, value []byte, anomaly, malformed bool) {
	s.n++
	sensor := s.r.IntN(64)
	key = []byte("sensor-" + strconv.Itoa(sensor))
	if s.r.Float64() < s.BadRate {
		bad := [...]string{
			`{"temp": "hot", "pressure": 101.2}`,
			`{"temp": 61.0, "pressure": `,
			`not json at all`,
			`{"pressure": 101.2, "humidity": 40}`,
		}
		return key, []byte(bad[s.r.IntN(len(bad))]), false, true
	}
	mode := s.r.IntN(3)
	var v [8]float64
	for j := range v {
		v[j] = sensorModes[mode][j] + float64(sensorSpread[j]*s.r.NormFloat64())
	}
	anomaly = s.r.Float64() < s.AnomalyRate
	if anomaly {
		for range 1 + s.r.IntN(3) {
			j := s.r.IntN(8)
			shift := (6 + float64(4*s.r.Float64())) * sensorSpread[j]
			if s.r.IntN(2) == 0 {
				shift = -shift
			}
			v[j] += shift
		}
	}
	b := make([]byte, 0, 320)
	b = fmt.Appendf(b, `{"sensor":"sensor-%d","seq":%d`, sensor, s.n)
	for j, f := range SensorFeatures {
		b = fmt.Appendf(b, `,"%s":%.4f,"%s_sd":%.4f`, f, v[j], f, sensorSpread[j]*(0.02+float64(0.08*s.r.Float64())))
	}
	b = fmt.Appendf(b, `,"anomaly":%t}`, anomaly)
	return key, b, anomaly, false
}

// SensorTableFeatures are the features of Sensors: the first four of the sensor stream, the
// reference pipeline config's (configs/pipeline.yaml).
var SensorTableFeatures = SensorFeatures[:4]

// Sensors is a table of rows sensor readings (temp, pressure, humidity, vibration) drawn as the
// stream draws them (three operating modes, Gaussian noise), with a fraction anomalyRate of
// spikes: one to three of the features shifted by 6 to 10 spreads, labelled 1. The README's
// sample file (data/sensors.csv: `outlierd gen --kind machines`).
func Sensors(rows int, seed uint64, anomalyRate float64) *Data {
	r := newRand(seed)
	d := &Data{Features: append([]string(nil), SensorTableFeatures...), Label: make([]uint8, rows)}
	for range d.Features {
		d.Cols = append(d.Cols, make([]float32, rows))
	}
	for i := range rows {
		mode := r.IntN(3)
		var v [4]float64
		for j := range v {
			v[j] = sensorModes[mode][j] + float64(sensorSpread[j]*r.NormFloat64())
		}
		if r.Float64() < anomalyRate {
			d.Label[i] = 1
			for range 1 + r.IntN(3) {
				j := r.IntN(4)
				shift := (6 + float64(4*r.Float64())) * sensorSpread[j]
				if r.IntN(2) == 0 {
					shift = -shift
				}
				v[j] += shift
			}
		}
		for j := range v {
			// Rounded as a sensor reports (4 decimals): a readable file.
			d.Cols[j][i] = float32(math.Round(v[j]*1e4) / 1e4)
		}
	}
	return d
}
