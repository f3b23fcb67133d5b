// Package amqpurl checks the AMQP URLs Climate is given (its notifier's, and Nova's
// notification bus) without ever repeating their passwords.
package amqpurl

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// Check validates an AMQP URL and returns it without its password (for logs and errors:
// scheme://user@host:port/vhost), and the password (to scrub from the library's errors).
// No error repeats the URL: it may hold the password.
func Check(raw string) (addr, password string, err error) {
	if raw == "" {
		return "", "", errors.New("amqp: no URL (amqp://user:password@host:5672/vhost)")
	}
	if strings.ContainsAny(raw, " \t\r\n") {
		return "", "", errors.New("amqp: the URL contains white space")
	}
	u, perr := url.Parse(raw)
	if perr != nil {
		// url.Error quotes the whole URL, password included: say what is wrong without it.
		return "", "", errors.New("amqp: the URL does not parse (percent-encode reserved characters such as @ : / ? # in the user name or password)")
	}
	if u.Scheme != "amqp" && u.Scheme != "amqps" {
		return "", "", fmt.Errorf("amqp: the URL's scheme is %q; want amqp or amqps", u.Scheme)
	}
	if u.Hostname() == "" {
		return "", "", errors.New("amqp: the URL names no host")
	}
	uri, perr := amqp091.ParseURI(raw)
	if perr != nil {
		return "", "", errors.New("amqp: the URL is not a valid AMQP URI (port, vhost or query)")
	}
	if uri.Port < 1 || uri.Port > 65535 {
		return "", "", fmt.Errorf("amqp: the URL's port %d is out of range", uri.Port)
	}
	password, _ = u.User.Password()
	user := url.User(uri.Username)
	redacted := url.URL{Scheme: uri.Scheme, User: user,
		Host: net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port)), Path: "/" + uri.Vhost}
	if uri.Vhost == "/" {
		redacted.Path = "/"
	}
	return redacted.String(), password, nil
}
