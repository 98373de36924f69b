"""Built-in detectors of sensitive values: a pattern that finds candidates, and a check that
keeps only real ones (a check digit, Luhn, mod 97, an address range), so that near-misses such
as an order number one digit off a card number stay in the text."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

# Bump whenever what the detectors find changes: it is part of every redacted document's
# version (``manifest.pipeline_version``), so the next run re-indexes what redaction touched.
DETECTOR_VERSION = 2

# Where a value printed over two lines was split: a line break, or the space that joining a
# PDF's lines puts after a hyphen ("4111-1111-" / "1111-1111"). ``Redactor.find`` scans the
# two lines apart again when a value joined over one fails its check.
WRAP = re.compile(r"\n|(?<=-) ")


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
    if len(WRAP.findall(text)) > 1:
        return False  # one wrap is a value split by a line end; more are rows of a table
    groups = re.split(r"[\s-]+", text)
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
    if len(WRAP.findall(text)) > 1:
        return False  # one wrap is a value split by a line end; more are rows of a table
    compact = re.sub(r"\s", "", text).upper()
    rearranged = compact[4:] + compact[:4]
    return 15 <= len(compact) <= 34 and int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def _cn_landline(national: str) -> bool:
    """A mainland China landline without its trunk 0: area code 10 or 2x with an eight-digit
    number, or a three-digit one from 3xx to 9xx with seven or eight digits; local numbers do
    not start with 0 or 1."""
    if national.startswith(("10", "2")):
        area, lengths = 2, (8,)
    elif national[:1] in tuple("3456789"):
        area, lengths = 3, (7, 8)
    else:
        return False
    local = national[area:]
    return len(local) in lengths and local[0] in "23456789"


def _cn_mobile(national: str) -> bool:
    return len(national) == 11 and national[0] == "1" and national[1] in "3456789"


def _phone(text: str) -> bool:
    digits = _digits(text)
    if text.startswith(("+", "00")):  # international: a country code and at most 15 digits
        international = digits[2:] if text.startswith("00") else digits
        if international.startswith("86"):  # mainland China's own plan, "+86 (0)10 …" too
            national = international[2:].removeprefix("0")
            return _cn_mobile(national) or _cn_landline(national)
        return international[0] != "0" and 8 <= len(international) <= 15
    if digits.startswith("1"):
        return _cn_mobile(digits)
    # A landline with its trunk 0. Written in groups, the first is the area code and the rest
    # are no shorter than three digits: "010 6552 9988", not a row of figures such as
    # "0106 55 29 988".
    if not (digits.startswith("0") and _cn_landline(digits[1:])):
        return False
    groups = re.findall(r"\d+", text)
    area = 3 if digits.startswith(("010", "02")) else 4
    return len(groups) == 1 or (
        len(groups[0]) == area and all(len(group) >= 3 for group in groups[1:])
    )


def _ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


# Not inside a longer run of letters or digits: "a1234…" is no phone number.
_ALONE_BEFORE, _ALONE_AFTER = r"(?<![\w.+-])", r"(?![\w@])"

_LINE_BREAK = r"(?:-?\r?\n|- )"  # between two groups of digits
_FOURS = r"\d{4}(?:[ -]\d{4}){0,3}"  # a card's groups of four
# In an e-mail address: one space (a PDF's lines joined) or line break.
_EMAIL_WRAP = r"(?:\r?\n|[ \t])"
_LABEL, _TLD = r"[A-Za-z0-9-]+", r"[A-Za-z]{2,24}(?![\w-])"

BUILT_IN: dict[str, Detector] = {
    "email": Detector(
        "email",
        re.compile(
            r"(?<![\w.%+-])[A-Za-z0-9._%+-]+@(?:"
            # Whole, tried first: an address complete before a line end never takes in the
            # next line ("ann@zyxqvw.org." / "then …").
            + rf"(?:{_LABEL}\.)+{_TLD}"
            # Split right after the '@': what is left of it is no address.
            + rf"|{_EMAIL_WRAP}(?:{_LABEL}\.)+{_TLD}"
            # Split at the dot after the domain's first label, going on in lower case (a
            # sentence that ends on "ann@localhost." starts the next with a capital).
            + rf"|{_LABEL}(?:\.{_EMAIL_WRAP}|{_EMAIL_WRAP}\.)(?=[a-z0-9])(?:{_LABEL}\.)*{_TLD}"
            + ")"
        ),
    ),
    "iban": Detector(
        "iban",
        re.compile(
            _ALONE_BEFORE
            + r"[A-Z]{2}\d{2}(?:(?: |\r?\n)?[A-Z0-9]{4}){2,7}(?:(?: |\r?\n)?[A-Z0-9]{1,4})?"
            + _ALONE_AFTER
        ),
        _iban,
    ),
    "cn_id": Detector(
        "cn_id", re.compile(r"(?<![\w])[1-9]\d{5}(?:18|19|20)\d{9}[\dXx](?![\w])"), _cn_id
    ),
    "card": Detector(
        "card",
        re.compile(
            _ALONE_BEFORE
            + r"(?:\d(?:[ -]?\d){12,18}"
            # Printed in groups and split between two: 4-4-4-4(-3), or 4-6-5 (Amex).
            + rf"|{_FOURS}{_LINE_BREAK}{_FOURS}(?:[ -]\d{{1,3}})?"
            + rf"|\d{{4}}(?:[ -]|{_LINE_BREAK})\d{{6}}(?:[ -]|{_LINE_BREAK})\d{{4,5}})"
            + _ALONE_AFTER
        ),
        _card,
    ),
    "phone": Detector(
        "phone",
        re.compile(
            _ALONE_BEFORE
            + r"(?:(?:\+|00)\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d{1,4}(?:[ .-]?\d{2,4}){1,4}"
            + r"|1[3-9]\d[ -]?\d{4}[ -]?\d{4}"
            # A landline: the whole run of digit groups, so that the check sees a longer
            # run of figures ("021 6432 1234 5678") whole and refuses it.
            + r"|(?:\(0\d{2,3}\)|0\d{2,3})[ -]?+\d++(?:[ -]\d++)*+)"
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

# A value as hashed: without the breaks a line end put in it (an address holds no space), nor a
# card's or IBAN's group separators, so that a value hashes alike however it is printed.
_CANONICAL: dict[str, Callable[[str], str]] = {
    "email": lambda value: re.sub(r"\s", "", value),
    "card": _digits,
    "iban": lambda value: re.sub(r"\s", "", value).upper(),
}


def canonical(kind: str, value: str) -> str:
    return _CANONICAL.get(kind, lambda same: same)(value)


# Earlier wins where two detectors find overlapping values (an 18-digit ID is not a card).
PRIORITY = ("email", "iban", "cn_id", "card", "phone", "ip")
