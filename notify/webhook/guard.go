package webhook

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"climate"
)

// Guard keeps webhooks, whose URLs tenants choose, out of the operator's network: unless
// AllowPrivate, a webhook may reach only public unicast addresses. It is checked when a
// webhook is created (the name must resolve to allowed addresses only) and again on every
// connection (Control), so a name that later resolves elsewhere (DNS rebinding) is refused
// at dial time.
type Guard struct {
	// AllowPrivate lets webhooks reach loopback, private and link-local addresses: for a
	// deployment whose receivers live on the operator's own network (and for tests).
	AllowPrivate bool
	// Resolver looks names up; nil means net.DefaultResolver.
	Resolver *net.Resolver
}

// nonPublic lists special-purpose ranges beyond what netip's predicates cover (RFC 6890
// and its updates): shared address space, IETF protocol assignments, documentation,
// benchmarking, reserved, NAT64 and 6to4/Teredo relays, which can embed private IPv4s.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("2001::/23"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("2002::/16"),
}

// CheckAddr refuses an address a webhook may not reach, saying what kind it is.
func (g Guard) CheckAddr(a netip.Addr) error {
	a = a.Unmap()
	if a.IsUnspecified() || a.IsMulticast() {
		return fmt.Errorf("%s is not a unicast address", a)
	}
	if g.AllowPrivate {
		return nil
	}
	kind := ""
	switch {
	case a.IsLoopback():
		kind = "a loopback"
	case a.IsPrivate():
		kind = "a private"
	case a.IsLinkLocalUnicast():
		kind = "a link-local"
	default:
		for _, p := range nonPublic {
			if p.Contains(a) {
				kind = "a special-purpose"
				break
			}
		}
	}
	if kind != "" {
		return fmt.Errorf("%s is %s address; webhooks may reach only public addresses unless the operator allows private ones (climate serve --webhook-allow-private)", a, kind)
	}
	return nil
}

// Control is a net.Dialer Control function: it refuses to connect to an address the
// guard does not allow, whatever name resolved to it.
func (g Guard) Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("webhook connection to %q: %v", address, err)
	}
	return g.CheckAddr(ap.Addr())
}

// CheckURL checks a webhook URL a client gave: an absolute http or https URL without
// credentials, whose host resolves (within ctx) to allowed addresses only. Its errors are
// the client's (CodeInvalid), each saying what is wrong.
func (g Guard) CheckURL(ctx context.Context, raw string) (*url.URL, error) {
	if err := climate.CheckText("url", raw, climate.MaxWebhookURLLength); err != nil {
		return nil, err
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, climate.Errorf(climate.CodeInvalid, "Invalid url %q: %v", raw, unwrapURLError(err))
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, climate.Errorf(climate.CodeInvalid, "Invalid url %q: the scheme must be http or https", raw)
	case u.Host == "" || u.Hostname() == "":
		return nil, climate.Errorf(climate.CodeInvalid, "Invalid url %q: no host", raw)
	case u.User != nil:
		return nil, climate.Errorf(climate.CodeInvalid, "Invalid url %q: credentials in the URL are not accepted (it is shown to everyone who can list the webhook); the receiver checks the signature instead", redactUser(u))
	case u.Fragment != "":
		return nil, climate.Errorf(climate.CodeInvalid, "Invalid url %q: a fragment (#…) is never sent to a server", raw)
	}
	if p := u.Port(); p != "" {
		if n, err := net.LookupPort("tcp", p); err != nil || n == 0 {
			return nil, climate.Errorf(climate.CodeInvalid, "Invalid url %q: bad port %q", raw, p)
		}
	}
	host := u.Hostname()
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		r := g.Resolver
		if r == nil {
			r = net.DefaultResolver
		}
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		addrs, err = r.LookupNetIP(lctx, "ip", host)
		if err != nil || len(addrs) == 0 {
			return nil, climate.Errorf(climate.CodeInvalid, "Invalid url %q: the host %q does not resolve: %v", raw, host, unwrapDNSError(err))
		}
	}
	for _, a := range addrs {
		if err := g.CheckAddr(a); err != nil {
			return nil, climate.Errorf(climate.CodeInvalid, "Webhook url %q is refused: %s resolves to %v", raw, host, err)
		}
	}
	return u, nil
}

func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

func unwrapDNSError(err error) string {
	if err == nil {
		return "no addresses"
	}
	if de, ok := err.(*net.DNSError); ok {
		return de.Err
	}
	return err.Error()
}

// redactUser returns u's text with its password hidden.
func redactUser(u *url.URL) string {
	return strings.Replace(u.Redacted(), u.User.Username()+"@", "…@", 1)
}
