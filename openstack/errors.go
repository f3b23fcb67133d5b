package openstack

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
)

// Message describes err for a lease's status and the log: for an answer of an OpenStack
// API, its status and the message of its body ({"badRequest": {"message": "…"}} for
// Nova, {"error": {"message": "…"}} for Keystone), without the request's URL.
func Message(err error) string {
	var code gophercloud.ErrUnexpectedResponseCode
	if !errors.As(err, &code) {
		return err.Error()
	}
	msg := strings.TrimSpace(string(code.Body))
	var body map[string]json.RawMessage
	if json.Unmarshal(code.Body, &body) == nil {
		for _, v := range body {
			var inner struct {
				Message string `json:"message"`
			}
			if json.Unmarshal(v, &inner) == nil && inner.Message != "" {
				msg = inner.Message
				break
			}
		}
	}
	if len(msg) > 500 {
		msg = msg[:500] + "…"
	}
	return fmt.Sprintf("OpenStack answered %d: %s", code.Actual, msg)
}
