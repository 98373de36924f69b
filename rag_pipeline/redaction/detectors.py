"""Built-in detectors of sensitive values: a pattern that finds candidates, and a check that
keeps only real ones (a check digit, Luhn, mod 97, an address range), so that near-misses such
as an order number one digit off a card number stay in the text."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date


def _any(_: str) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class Detector:
    name: str  # the mask reads [NAME]
    pattern: re.Pattern[str]
    valid: Callable[[str], bool] = _any  # a check beyond the pattern


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def luhn_valid(number: str) -> bool:
    digits = [int(d) for d in reversed(number)]
    total = sum(digits[0::2]) + sum(sum(divmod(2 * d, 10)) for d in digits[1::2])
    return total % 10 == 0


def _card(text: str) -> bool:
    digits = _digits(text)
    groups = re.split(r"[ -]", text)
    if len(groups) > 1 and all(len(g) == 4 and 1900 <= int(g) <= 2099 for g in groups):
        return False  # a table's header of years ("2020 2019 2018 2017"), one in ten Luhn-valid
    return 13 <= len(digits) <= 19 and digits[0] in "23456" and luhn_valid(digits)


_CN_ID_WEIGHTS = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2]


def _cn_id(text: str) -> bool:
    """A mainland China resident ID: region, a real birth date, and the ISO 7064 check digit."""
    try:
        date(int(text[6:10]), int(text[10:12]), int(text[12:14]))
    except ValueError:
        return False
    total = sum(int(d) * w for d, w in zip(text[:17], _CN_ID_WEIGHTS, strict=True))
    return "10X98765432"[total % 11] == text[17].upper()


def _iban(text: str) -> bool:
    compact = re.sub(r"\s", "", text).upper()
    rearranged = compact[4:] + compact[:4]
    return 15 <= len(compact) <= 34 and int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def _phone(text: str) -> bool:
    digits = _digits(text)
    if text.startswith(("+", "00")):  # international: a country code and at most 15 digits
        international = digits[2:] if text.startswith("00") else digits
        return 8 <= len(international) <= 15
    if digits.startswith("1"):  # mainland China mobile
        return len(digits) == 11 and digits[1] in "3456789"
    return digits.startswith("0") and 10 <= len(digits) <= 12  # mainland China landline


def _ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


# Not inside a longer run of letters or digits: "a1234…" is no phone number.
_ALONE_BEFORE, _ALONE_AFTER = r"(?<![\w.+-])", r"(?![\w@])"

BUILT_IN: dict[str, Detector] = {
    "email": Detector(
        "email",
        re.compile(r"(?<![\w.%+-])[A-Za-z0-9._%+-]+@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,24}(?![\w-])"),
    ),
    "iban": Detector(
        "iban",
        re.compile(
            _ALONE_BEFORE
            + r"[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?"
            + _ALONE_AFTER
        ),
        _iban,
    ),
    "cn_id": Detector(
        "cn_id", re.compile(r"(?<![\w])[1-9]\d{5}(?:18|19|20)\d{9}[\dXx](?![\w])"), _cn_id
    ),
    "card": Detector(
        "card", re.compile(_ALONE_BEFORE + r"\d(?:[ -]?\d){12,18}" + _ALONE_AFTER), _card
    ),
    "phone": Detector(
        "phone",
        re.compile(
            _ALONE_BEFORE
            + r"(?:(?:\+|00)\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d{1,4}(?:[ .-]?\d{2,4}){1,4}"
            + r"|1[3-9]\d[ -]?\d{4}[ -]?\d{4}"
            + r"|0\d{2,3}[ -]?\d{7,8})"
            + _ALONE_AFTER
        ),
        _phone,
    ),
    "ip": Detector(
        "ip",
        re.compile(
            r"(?<![\w.:])(?:(?:\d{1,3}\.){3}\d{1,3}"
            r"|(?=[0-9A-Fa-f:]*:[0-9A-Fa-f:]*:)[0-9A-Fa-f:]{2,39})(?![\w.:])"
        ),
        _ip,
    ),
}

# Earlier wins where two detectors find overlapping values (an 18-digit ID is not a card).
PRIORITY = ("email", "iban", "cn_id", "card", "phone", "ip")
