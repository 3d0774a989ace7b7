#!/usr/bin/env python3
"""Independent oracle for the grammar tests: parses instances as JSON and validates them
against their schema with python3-jsonschema (Debian's package), formats checked.

Input file: [{"schema": ..., "instances": ["<hex of the UTF-8 bytes>", ...]}, ...]
Output file: [[{"parses": bool, "valid": bool, "error": str}, ...], ...] in the same order.
"""
import datetime
import json
import re
import sys

import jsonschema

# RFC 3339 date-time and time; jsonschema checks them only with rfc3339-validator, which
# Debian does not package, so check the shape here and the calendar with datetime.
_TIME = r"([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})"
_DATE_TIME_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt]" + _TIME)
_TIME_RE = re.compile(_TIME)


def _check_time_part(text):
    m = _TIME_RE.fullmatch(text)
    if not m:
        return False
    hour, minute, second = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if hour > 23 or minute > 59 or second > 59:
        return False
    offset = m.group(5)
    if offset not in ("Z", "z"):
        oh, om = int(offset[1:3]), int(offset[4:6])
        if oh > 23 or om > 59:
            return False
    return True


def _format_checker(cls):
    # The draft's own checkers (FormatChecker() would mix in draft 3's "time", HH:MM:SS).
    checker = jsonschema.FormatChecker(formats=())
    checker.checkers = dict(cls.FORMAT_CHECKER.checkers)
    if "date-time" not in checker.checkers:
        @checker.checks("date-time", raises=ValueError)
        def _date_time(instance):
            if not isinstance(instance, str):
                return True
            if not _DATE_TIME_RE.fullmatch(instance):
                return False
            datetime.date.fromisoformat(instance[:10])
            return _check_time_part(instance[11:])
    if "time" not in checker.checkers:
        @checker.checks("time", raises=ValueError)
        def _time(instance):
            return not isinstance(instance, str) or _check_time_part(instance)
    return checker


def main():
    cases = json.load(open(sys.argv[1]))
    out = []
    for case in cases:
        schema = case["schema"]
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        validator = cls(schema, format_checker=_format_checker(cls))
        results = []
        for hex_text in case["instances"]:
            r = {"parses": False, "valid": False, "error": ""}
            try:
                value = json.loads(bytes.fromhex(hex_text).decode("utf-8"))
                r["parses"] = True
            except (ValueError, UnicodeDecodeError) as e:
                r["error"] = "parse: " + str(e)
                results.append(r)
                continue
            try:
                errors = list(validator.iter_errors(value))
            except ValueError as e:  # a format checker raising on garbage
                errors = [e]
            r["valid"] = not errors
            if errors:
                r["error"] = str(errors[0]).splitlines()[0]
            results.append(r)
        out.append(results)
    json.dump(out, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
