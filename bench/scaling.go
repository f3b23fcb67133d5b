package bench

// apiScaling compares the runs' creation rates: Clients the largest client count's over
// the smallest's, on the smallest replica set; Replicas the largest set's over the
// smallest's, at the largest client count. Each is there when the runs have two such
// counts and the base rate is not 0.
type apiScaling struct {
	Clients  *apiRatio `json:"clients,omitempty"`
	Replicas *apiRatio `json:"replicas,omitempty"`
}

// apiRatio is the creation rate with Of clients (replicas) over the rate with Over, both
// At replicas (clients).
type apiRatio struct {
	Of    int     `json:"of"`
	Over  int     `json:"over"`
	At    int     `json:"at"`
	Ratio float64 `json:"ratio"`
}

func apiScalingOf(runs []apiRunReport) *apiScaling {
	if len(runs) == 0 {
		return nil
	}
	type key struct{ replicas, clients int }
	rate := map[key]float64{}
	minR, maxR, minC, maxC := runs[0].Replicas, runs[0].Replicas, runs[0].Clients, runs[0].Clients
	for _, r := range runs {
		rate[key{r.Replicas, r.Clients}] = r.CreationsPerSecond
		minR, maxR = min(minR, r.Replicas), max(maxR, r.Replicas)
		minC, maxC = min(minC, r.Clients), max(maxC, r.Clients)
	}
	ratio := func(of, over key) float64 { return round(rate[of]/rate[over], 2) }
	s := &apiScaling{}
	if base := (key{minR, minC}); minC < maxC && rate[base] > 0 {
		s.Clients = &apiRatio{Of: maxC, Over: minC, At: minR, Ratio: ratio(key{minR, maxC}, base)}
	}
	if base := (key{minR, maxC}); minR < maxR && rate[base] > 0 {
		s.Replicas = &apiRatio{Of: maxR, Over: minR, At: maxC, Ratio: ratio(key{maxR, maxC}, base)}
	}
	if s.Clients == nil && s.Replicas == nil {
		return nil
	}
	return s
}
