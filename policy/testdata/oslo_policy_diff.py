"""Evaluate policy cases with oslo.policy, for policy's differential test.

Reads a JSON list of cases from stdin, each {"rules": {name: text or list rule},
"rule": name, "target": {...}, "creds": {...}}, and writes a JSON list with, for each
case, {"invalid": [names of the rules oslo.policy could not understand],
"result": bool, "error": text of an exception raised by enforce, or null}.

A rule is invalid when oslo.policy's parser logs an error for it (it then denies), or
parses into something that is not a check (a lone "(", "not" or quoted string, on which
enforce raises): Climate refuses to load both.
"""
import json
import logging
import sys

from oslo_config import cfg
from oslo_policy import _checks
from oslo_policy import _parser
from oslo_policy import policy


class Recorder(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.ERROR)
        self.count = 0

    def emit(self, record):
        self.count += 1


def main():
    rec = Recorder()
    log = logging.getLogger("oslo_policy._parser")
    log.addHandler(rec)
    log.propagate = False

    conf = cfg.ConfigOpts()
    conf(args=[], default_config_files=[], default_config_dirs=[])
    enforcer = policy.Enforcer(conf, use_conf=False)

    out = []
    for case in json.load(sys.stdin):
        invalid = []
        parsed = {}
        for name, text in case["rules"].items():
            before = rec.count
            parsed[name] = _parser.parse_rule(text)
            if rec.count != before or not isinstance(parsed[name], _checks.BaseCheck):
                invalid.append(name)
        result, error = False, None
        if invalid:  # Climate refuses the whole set: nothing to compare
            out.append({"invalid": sorted(invalid), "result": result, "error": error})
            continue
        enforcer.set_rules(parsed)
        try:
            result = bool(enforcer.enforce(case["rule"], case["target"], case["creds"]))
        except Exception as e:  # noqa: BLE001 - reported to the Go side
            error = "%s: %s" % (type(e).__name__, e)
        out.append({"invalid": sorted(invalid), "result": result, "error": error})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
