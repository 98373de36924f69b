"""Who is asking, and which workspaces they may use.

Users are named in the installation's settings (``access.users``, written by ``rag-pipeline user
add``): a salted scrypt hash of their password, the SHA-256 of their bearer token, and the
workspaces granted to them. A request proves who it is by one of:

- ``Authorization: Bearer <token>``: the search API, agents (``/mcp`` too), ``gradio_client``;
- ``Authorization: Basic …`` (user name and password);
- the session cookie the sign-in form sets (``sign_in``), or its twin ``/login`` for
  ``gradio_client``'s ``auth=``: a browser visiting the page without one is sent to the form;
- the header a trusted reverse proxy sets (``access.proxy_user_header``), when configured.

One ASGI middleware checks every request, the page, Gradio's own routes and the API alike, so no
route can be forgotten. A password is hashed (scrypt, on purpose slow) in a thread of its own, never
on the event loop and at a lower CPU priority, so guesses do not hold up other requests; wrong
ones are throttled per user name and per client address (:class:`Throttle`), and an unknown
name costs the same hashing as a known one, so timing tells no names. With nobody configured
the server only binds to loopback (``check_binding``), and whoever reaches it is the local
user, who may use every workspace.

What each role may do, and the action of each route and event of the page, are one table
(``permissions``); a refusal is one line in the log (``refusals``). The parts: the users as the
settings store them (``users``), the authenticator that tells who is asking
(``authenticator``), its count of wrong passwords (``throttle``), its browser sessions
(``sessions``) and the browsers that signed in before (``devices``), the sign-in form
(``sign_in``), and the middleware at the door (``middleware``).
"""

from serving.access.authenticator import Authenticator
from serving.access.devices import DEVICE_COOKIE, DEVICE_DAYS, DeviceCookies
from serving.access.middleware import (
    PAGE_HEADERS,
    AccessMiddleware,
    Receive,
    Send,
    check_binding,
)
from serving.access.permissions import (
    HTTP_ROUTES,
    LEAST_ROLE,
    MCP_TOOLS,
    OPEN_ROUTES,
    PAGE_EVENTS,
    Action,
    Role,
    Unlisted,
    check_listed,
    event_action,
)
from serving.access.sessions import SESSION_COOKIE, Sessions
from serving.access.sign_in import SIGN_IN, SIGN_OUT, sign_in_routes
from serving.access.throttle import Throttle, Throttled
from serving.access.users import (
    LOCAL_USER,
    AccessError,
    User,
    add_user,
    hash_password,
    remove_user,
    token_hash,
    verify_password,
)

__all__ = [
    "DEVICE_COOKIE",
    "DEVICE_DAYS",
    "HTTP_ROUTES",
    "LEAST_ROLE",
    "LOCAL_USER",
    "MCP_TOOLS",
    "OPEN_ROUTES",
    "PAGE_EVENTS",
    "PAGE_HEADERS",
    "SESSION_COOKIE",
    "SIGN_IN",
    "SIGN_OUT",
    "AccessError",
    "AccessMiddleware",
    "Action",
    "Authenticator",
    "DeviceCookies",
    "Receive",
    "Role",
    "Send",
    "Sessions",
    "Throttle",
    "Throttled",
    "Unlisted",
    "User",
    "add_user",
    "check_binding",
    "check_listed",
    "event_action",
    "hash_password",
    "remove_user",
    "sign_in_routes",
    "token_hash",
    "verify_password",
]
