package bench

import "testing"

func TestScalingRatios(t *testing.T) {
	runs := []apiRunReport{
		{Replicas: 1, Clients: 1, CreationsPerSecond: 50},
		{Replicas: 1, Clients: 16, CreationsPerSecond: 300},
		{Replicas: 3, Clients: 1, CreationsPerSecond: 45},
		{Replicas: 3, Clients: 16, CreationsPerSecond: 480},
	}
	s := apiScalingOf(runs)
	if s == nil || *s.Clients != (apiRatio{Of: 16, Over: 1, At: 1, Ratio: 6}) || *s.Replicas != (apiRatio{Of: 3, Over: 1, At: 16, Ratio: 1.6}) {
		t.Errorf("scaling %+v", s)
	}
	if s := apiScalingOf(runs[:1]); s != nil {
		t.Errorf("one run: %+v, want none", s)
	}
	if s := apiScalingOf([]apiRunReport{{Replicas: 1, Clients: 1}, {Replicas: 1, Clients: 4, CreationsPerSecond: 9}}); s != nil {
		t.Errorf("a base rate of 0: %+v, want none", s)
	}
}
