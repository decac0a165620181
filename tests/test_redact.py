"""capture/redact.py: every planted secret leaves, and ordinary text stays as it was.

Every secret here is fake: drawn from a seeded random in the shape of a real
one, so no credential, real or lookalike, is written in this file.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prime_memory_folding.capture.redact import Redaction, redact

ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "_-"
HEX = "0123456789abcdef"


def _draw(rng: random.Random, alphabet: str, n: int) -> str:
    """``n`` characters of ``alphabet``, holding a digit and a capital where it has them."""
    chars = [rng.choice(alphabet) for _ in range(n)]
    if any(c.isdigit() for c in alphabet):
        chars[rng.randrange(n)] = rng.choice(string.digits)
    if any(c.isupper() for c in alphabet):
        chars[rng.randrange(n)] = rng.choice(string.ascii_uppercase)
    return "".join(chars)


def _b64url(data: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def _jwt(rng: random.Random) -> str:
    header = _b64url({"alg": "HS256", "typ": "JWT"})
    claims = _b64url({"sub": _draw(rng, ALNUM, 12), "iat": rng.randrange(10**9, 2 * 10**9)})
    return f"{header}.{claims}.{_draw(rng, URLSAFE, 43)}"


#: kind -> how to draw a fake token of it that any context gives away by its shape.
TOKENS: dict[str, list[Callable[[random.Random], str]]] = {
    "openai-api-key": [
        lambda r: "sk-" + _draw(r, ALNUM, 48),
        lambda r: "sk-proj-" + _draw(r, URLSAFE, 120),
    ],
    "anthropic-api-key": [lambda r: "sk-ant-api03-" + _draw(r, URLSAFE, 93) + "AA"],
    "github-token": [
        *(
            lambda r, p=p: f"{p}_" + _draw(r, ALNUM, 36)
            for p in ("ghp", "gho", "ghu", "ghs", "ghr")
        ),
        lambda r: "github_pat_" + _draw(r, ALNUM, 22) + "_" + _draw(r, ALNUM, 59),
    ],
    "gitlab-token": [lambda r: "glpat-" + _draw(r, URLSAFE, 20)],
    "aws-access-key": [
        lambda r: "AKIA" + _draw(r, string.ascii_uppercase + string.digits, 16),
        lambda r: "ASIA" + _draw(r, string.ascii_uppercase + string.digits, 16),
    ],
    "google-api-key": [lambda r: "AIza" + _draw(r, URLSAFE, 35)],
    "slack-token": [
        *(
            lambda r, c=c: (
                f"xox{c}-{r.randrange(10**11, 10**12)}-{r.randrange(10**11, 10**12)}-"
                + _draw(r, ALNUM, 24)
            )
            for c in "baprs"
        ),
    ],
    "slack-webhook": [
        lambda r: (
            "https://hooks.slack.com/services/T"
            + _draw(r, string.ascii_uppercase + string.digits, 8)
            + "/B"
            + _draw(r, string.ascii_uppercase + string.digits, 10)
            + "/"
            + _draw(r, ALNUM, 24)
        )
    ],
    "stripe-key": [
        *(lambda r, p=p: p + _draw(r, ALNUM, 24) for p in ("sk_live_", "rk_live_", "sk_test_")),
    ],
    "sendgrid-key": [lambda r: "SG." + _draw(r, URLSAFE, 22) + "." + _draw(r, URLSAFE, 43)],
    "twilio-key": [
        lambda r: "SK" + _draw(r, HEX, 32),
        lambda r: "AC" + _draw(r, HEX, 32) + ":" + _draw(r, HEX, 32),
    ],
    "npm-token": [lambda r: "npm_" + _draw(r, ALNUM, 36)],
    "pypi-token": [lambda r: "pypi-AgEIcHlwaS5vcmc" + _draw(r, URLSAFE, 70)],
    "huggingface-token": [lambda r: "hf_" + _draw(r, string.ascii_letters, 34)],
    "jwt": [_jwt],
}

#: Where a token may turn up in what an agent sees or says.
CONTEXTS = [
    "Here is my key {s} please use it.",
    "The service failed with key {s}.",
    "export SERVICE_KEY={s}",
    "curl -s https://api.example.com/v1/items -H 'X-Key: {s}'",
    'curl -H "Authorization: Bearer {s}" https://api.example.com',
    '{{"client": "web", "credential": "{s}", "retries": 3}}',
    "service:\n  name: web\n  key: {s}\n",
    "NODE_ENV=production\nPORT=8080\nUPSTREAM={s}\n",
    'client = Client(api_key="{s}")',
    "const client = new Client({{ apiKey: '{s}' }});",
    'Traceback (most recent call last):\n  File "app.py", line 3, in <module>\n'
    '    connect("{s}")\nAuthError: invalid key {s}',
    "https://api.example.com/v1/items?key={s}&page=2",
    "`{s}`",
    "({s})",
    "key={s};timeout=30",
]


def _token_corpus() -> list[tuple[str, str, str]]:
    rng = random.Random(20261204)
    corpus = []
    for kind, makers in TOKENS.items():
        for make in makers:
            for context in CONTEXTS:
                secret = make(rng)
                corpus.append((kind, secret, context.format(s=secret)))
    return corpus


TOKEN_CORPUS = _token_corpus()


@pytest.mark.parametrize(
    ("kind", "secret", "text"),
    TOKEN_CORPUS,
    ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(TOKEN_CORPUS)],
)
def test_every_token_is_redacted_in_every_context(kind: str, secret: str, text: str) -> None:
    found = redact(text)
    assert secret not in found.text
    assert kind in found.kinds
    assert f"[redacted:{kind}]" in found.text


def _pem(rng: random.Random, label: str) -> tuple[str, str]:
    body = "\n".join(_draw(rng, string.ascii_letters + string.digits + "+/", 64) for _ in range(6))
    end = "BLOCK" if "PGP" in label else "KEY"
    headers = "Version: GnuPG v2\n\n" if "PGP" in label else ""
    kind = label.rsplit(" ", 1)[0]
    return f"-----BEGIN {label}-----\n{headers}{body}\n=Ab1c\n-----END {kind} {end}-----", body


def _secret_corpus() -> list[tuple[str, str, str]]:
    """(kind, secret, text): secrets known by their context, not their shape."""
    rng = random.Random(7)
    pw = lambda: _draw(rng, ALNUM + "!#%^*+", 14)  # noqa: E731
    aws_secret = lambda: _draw(rng, ALNUM + "/+", 40)  # noqa: E731
    corpus = []
    for label in (
        "RSA PRIVATE KEY",
        "EC PRIVATE KEY",
        "PRIVATE KEY",
        "ENCRYPTED PRIVATE KEY",
        "OPENSSH PRIVATE KEY",
        "DSA PRIVATE KEY",
        "PGP PRIVATE KEY BLOCK",
    ):
        block, body = _pem(rng, label)
        corpus.append(("private-key", body, f"$ cat ~/.ssh/id\n{block}\n$ ls"))
        corpus.append(("private-key", body, json.dumps({"key": block})))
    block, body = _pem(rng, "RSA PRIVATE KEY")
    cut = block[: block.index("=Ab1c")]
    corpus.append(("private-key", body, f"$ head -8 key.pem\n{cut}\n$ echo done"))
    templates = {
        "url-password": [
            "postgres://app:{s}@db.internal:5432/app",
            "DATABASE_URL=mysql://root:{s}@localhost/shop",
            "git clone https://deploy:{s}@git.example.com/acme/api.git",
            "redis://:{s}@cache:6379/0",
            "amqp://guest:{s}@rabbit:5672/ vhost",
            "Error: connect ECONNREFUSED mongodb+srv://admin:{s}@cluster0.example.net/test",
        ],
        "password": [
            "Server=db;Database=shop;User Id=sa;Password={s};",
            "Driver={{ODBC Driver 18}};Server=db;UID=sa;PWD={s};",
            "host=db user=app password={s} dbname=app sslmode=require",
            "jdbc:postgresql://db/app?user=app&password={s}&ssl=true",
            "DB_PASSWORD={s}",
            "export PGPASSWORD={s}",
            "password: {s}",
            'password: "{s}"',
            '"password": "{s}"',
            "'db_pass': '{s}'",
            'self.password = "{s}"',
            "$password = '{s}';",
            "mysql --user=root --password={s} shop",
            "psql --password {s}",
            "SMTP_PASS={s}",
            "PASSWORD={s} ./deploy.sh",
            '  "smtpPassword": "{s}",',
        ],
        "credential": [
            "API_KEY={s}",
            "SECRET_KEY = '{s}'",
            "client_secret: {s}",
            "GITHUB_TOKEN={s}",
            '"access_token": "{s}"',
            "SENTRY_KEY={s}",
            "auth_token={s}",
            "TWILIO_AUTH_TOKEN={s}",
            "x-api-key: {s}",
            "const apiKey = '{s}';",
            "PRIVATE_KEY={s}",
            "Credentials = {s}",
        ],
        "aws-secret-key": [
            "aws_secret_access_key = {a}",
            "AWS_SECRET_ACCESS_KEY={a}",
            '"SecretAccessKey": "{a}",',
            "aws configure set aws_secret_access_key {a}",
        ],
        "authorization": [
            "Authorization: Basic {b}",
            'curl -H "Authorization: token {s}" https://api.example.com',
            "authorization: Bearer {s}",
            '{{"headers": {{"Authorization": "Bearer {s}"}}}}',
        ],
    }
    for kind, texts in templates.items():
        for template in texts:
            secret = aws_secret() if "{a}" in template else pw()
            basic = base64.b64encode(f"user:{secret}".encode()).decode()
            shown = basic if "{b}" in template else secret
            corpus.append((kind, shown, template.format(s=secret, a=secret, b=basic)))
    env = {"DB_PASSWORD": pw(), "SESSION_SECRET": pw(), "STRIPE_WEBHOOK_KEY": pw()}
    dump = "\n".join(["NODE_ENV=production", "PORT=3000", *(f"{k}={v}" for k, v in env.items())])
    corpus.extend(("password" if "PASS" in k else "credential", v, dump) for k, v in env.items())
    return corpus


SECRET_CORPUS = _secret_corpus()


@pytest.mark.parametrize(
    ("kind", "secret", "text"),
    SECRET_CORPUS,
    ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(SECRET_CORPUS)],
)
def test_every_secret_known_by_its_context_is_redacted(kind: str, secret: str, text: str) -> None:
    found = redact(text)
    assert secret not in found.text
    assert kind in found.kinds


def test_a_pem_block_goes_whole_and_what_follows_stays() -> None:
    block, _ = _pem(random.Random(3), "OPENSSH PRIVATE KEY")
    found = redact(f"before\n{block}\nafter the key")
    assert found.text == "before\n[redacted:private-key]\nafter the key"
    assert found.kinds == ("private-key",)


def test_a_url_keeps_everything_but_its_password() -> None:
    found = redact("postgres://app:hunter2-but-longer@db.internal:5432/app?sslmode=require")
    assert (
        found.text == "postgres://app:[redacted:url-password]@db.internal:5432/app?sslmode=require"
    )


def test_a_dotenv_dump_keeps_values_that_are_no_credentials() -> None:
    dump = "NODE_ENV=production\nPORT=3000\nDATABASE_HOST=db.internal\nDB_PASSWORD=n0t-a-real-pw\n"
    assert redact(dump).text == dump.replace("n0t-a-real-pw", "[redacted:password]")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a <private>my home address</private> b", "a [private] b"),
        ("a <PRIVATE>x</Private> b <private>y</private>", "a [private] b [private]"),
        ("keep\n<private>\nline one\nline two\n</private>\nkeep", "keep\n[private]\nkeep"),
        ("keep <private> and everything after\nit", "keep [private]"),
    ],
)
def test_private_sections_are_removed_whole(text: str, expected: str) -> None:
    found = redact(text)
    assert found.text == expected
    assert set(found.kinds) == {"private"}


def test_kinds_come_in_the_order_of_the_text() -> None:
    rng = random.Random(1)
    github = "ghp_" + _draw(rng, ALNUM, 36)
    aws = "AKIA" + _draw(rng, string.ascii_uppercase + string.digits, 16)
    found = redact(f"first {github}, <private>x</private> then {aws} and password=s3cr3t-pw")
    assert found.kinds == ("github-token", "private", "aws-access-key", "password")


ORDINARY = [
    # Python
    "def tokenize(text: str) -> list[str]:\n    return text.split()\n",
    "token = tokenizer(text)",
    'api_key=os.environ["API_KEY"]',
    'api_key = os.getenv("OPENAI_API_KEY")',
    "password=None",
    "def login(user: str, password: str | None = None) -> Session:",
    "session = connect(user=user, password=password)",
    "if token == expected_token:\n    raise AuthError('token mismatch')",
    "self.password = password\nself.token = access_token",
    "secret_name = 'prod/db'\nSECRET_KEY_FILE=/run/secrets/django",
    "max_tokens: 4096\ntoken_count = len(tokens)\nauthor: Jane Doe",
    "tokenizer: bert-base-uncased\nTOKENIZERS_PARALLELISM=false",
    "password_reset_url = reverse('password-reset')",
    'cursor.execute("SELECT id FROM users WHERE password_hash = %s", (digest,))',
    # JavaScript / TypeScript
    "const apiKey = process.env.API_KEY;\nconst token = await getToken();",
    "function login({ username, password }: Credentials): Promise<Token> {}",
    "let password: string;\nconst auth = useAuth();",
    "headers: { Authorization: `Bearer ${token}` },",
    # SQL
    "CREATE TABLE users (id uuid primary key, password_hash text, token_expires timestamptz);",
    "UPDATE sessions SET token = ? WHERE id = ?;",
    # shell
    "git log --oneline | head -5 && ls -la ~/.ssh",
    'curl -H "Authorization: Bearer $TOKEN" https://api.example.com/v1/me',
    "export GITHUB_TOKEN=${GITHUB_TOKEN:?set it first}",
    "docker run -e POSTGRES_PASSWORD=$POSTGRES_PASSWORD postgres:16",
    "PWD=/home/dev/project\nOLDPWD=/home/dev",
    "echo $PATH; cd /tmp; make test -j2",
    # configuration with stand-ins
    "API_KEY=<your-api-key>\nSECRET_KEY=changeme\nDB_PASSWORD=xxxxxxxx\nAUTH_TOKEN=your_token_here",
    "password: ${DB_PASSWORD}\ntoken: {{ vault_token }}\nauth: basic",
    'f"postgres://{user}:{password}@{host}/{db}"',
    # Markdown and prose
    "## Password reset flow\n\nThe password reset flow sends a token by email.",
    "We rotate the API key every 90 days; see the secrets runbook.",
    "Pass the auth header along; the secret sauce is caching.",
    # identifiers that look random but are not secrets
    "commit 3f786850e387550fdab836ed7e6dc881de23001b (HEAD -> main)",
    "request id 123e4567-e89b-12d3-a456-426614174000",
    "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "![logo](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==)",
    "numpy==1.26.4, torch>=2.3.0, version 3.11.7-slim, v0.10.2",
    "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",
    "sk-learn-compatible-estimator-wrapper",
    # URLs without passwords
    "https://github.com/acme/api/blob/main/README.md#install",
    "git@github.com:acme/api.git and ssh://git@github.com:22/acme/api.git",
    "postgres://app@db.internal:5432/app",
    "https://example.com/reset?token_type=email&step=2",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_comes_out_unchanged(text: str) -> None:
    assert redact(text) == Redaction(text, ())


def test_a_long_capture_is_redacted_whole() -> None:
    rng = random.Random(5)
    secrets = [TOKENS["github-token"][0](rng) for _ in range(50)]
    text = "\n".join(f"{ORDINARY[i % len(ORDINARY)]}\nnext key {s}" for i, s in enumerate(secrets))
    text = (text + "\n") * (100_000 // len(text) + 1)
    found = redact(text)
    assert not any(s in found.text for s in secrets)


WORDS = st.sampled_from(
    [
        "the",
        "a",
        "key",
        "token",
        "password",
        "secret",
        "auth",
        "fix",
        "bug",
        "deploy",
        "reset",
        "flow",
        "pass",
        "run",
        "test",
        "sk",
        "gh",
        "AKIA",
        "eyJ",
        "Bearer",
        "user",
        "host",
        "db",
        "value",
        "x",
        "42",
        "(done).",
        ",",
        "!",
        "?",
    ]
)
PROSE = st.lists(WORDS, max_size=40).map(" ".join)


@settings(deadline=None)
@given(st.text(max_size=200) | PROSE)
def test_redacting_twice_changes_nothing_more(text: str) -> None:
    once = redact(text).text
    assert redact(once).text == once


@settings(deadline=None)
@given(st.lists(WORDS | st.sampled_from(["\n", "\n\n", ";"]), max_size=60).map(" ".join))
def test_text_without_secrets_or_markers_is_unchanged(text: str) -> None:
    assert redact(text) == Redaction(text, ())


KINDS = sorted(TOKENS)


@settings(deadline=None)
@given(
    PROSE,
    st.lists(
        st.tuples(st.integers(0, 40), st.sampled_from(KINDS), st.integers(0, 2**32)),
        min_size=1,
        max_size=5,
    ),
    st.sampled_from([" ", "\n", " (", ": ", ' "', " `", "="]),
)
def test_no_planted_secret_survives(
    prose: str, plants: list[tuple[int, str, int]], before: str
) -> None:
    words = prose.split(" ")
    secrets = []
    for at, kind, seed in plants:
        rng = random.Random(seed)
        secret = rng.choice(TOKENS[kind])(rng)
        secrets.append(secret)
        words.insert(min(at, len(words)), before.lstrip(" ") + secret)
    found = redact(" ".join(words))
    assert not any(secret in found.text for secret in secrets)


def test_a_token_glued_to_another_secret_goes_in_the_same_call() -> None:
    rng = random.Random(9)
    github = "ghp_" + _draw(rng, ALNUM, 36)
    block, _ = _pem(rng, "RSA PRIVATE KEY")
    found = redact(f"{github}{block}")
    assert found.text == "[redacted:github-token][redacted:private-key]"
    assert redact(found.text).text == found.text
