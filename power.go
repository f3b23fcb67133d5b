package climate

import "time"

// PowerState is what power management last knew of a host's power.
type PowerState string

// Power states. The two switching states last while a power command runs; a host powered
// off is counted as off from when its power-off command succeeded until its power-on
// command starts.
const (
	PowerUnknown      PowerState = "unknown"
	PowerOn           PowerState = "on"
	PowerOff          PowerState = "off"
	PowerSwitchingOn  PowerState = "powering_on"
	PowerSwitchingOff PowerState = "powering_off"
)

// HostPower is a host's power state as power management recorded it.
type HostPower struct {
	HostID    string
	State     PowerState
	ChangedAt time.Time
	// OffBefore is how long the host was powered off, in all, before ChangedAt.
	OffBefore time.Duration
}

// OffFor returns how long the host has been powered off, in all, as of now.
func (p HostPower) OffFor(now time.Time) time.Duration {
	if p.State == PowerOff && now.After(p.ChangedAt) {
		return p.OffBefore + now.Sub(p.ChangedAt)
	}
	return p.OffBefore
}

// Next returns p moved to state at now, carrying the time off over.
func (p HostPower) Next(state PowerState, now time.Time) HostPower {
	return HostPower{HostID: p.HostID, State: state, ChangedAt: now, OffBefore: p.OffFor(now)}
}
