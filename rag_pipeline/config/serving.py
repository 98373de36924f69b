"""What the query side is told: how a question finds its passages and is answered, the page
and its API, and who may use them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class RetrievalSettings(BaseModel):
    """How a question finds its passages (query time only: changing these re-indexes nothing)."""

    prefetch: int = Field(
        60, ge=1, description="Nearest candidates taken from each vector (dense, sparse)."
    )
    fusion: Literal["rrf", "dbsf", "minmax"] = Field(
        "dbsf",
        description="How the dense and sparse rankings merge: reciprocal rank fusion, "
        "distribution-based score fusion (the default: best on SciFact, see "
        "bench/fusion_sweep.py), or a sum of min-max normalised scores.",
    )
    rrf_k: float = Field(60.0, gt=0, description="RRF's k: larger flattens the rank weights.")
    dense_weight: float = Field(1.0, ge=0, description="Weight of the dense ranking in fusion.")
    sparse_weight: float = Field(1.0, ge=0, description="Weight of the sparse ranking.")
    image_weight: float = Field(
        0.0,
        ge=0,
        description="Weight, in the passages' fusion, of the pictures' ranking by the query "
        "through CLIP's text tower (when images.clip_model is set). 0: those pictures are "
        "shown beside the answer (retrieval.pictures), and only pictures whose captions "
        "match compete with text passages. CLIP's text-to-image similarities are low and "
        "flat, so normalised fusion would put the best picture near the top of any query.",
    )
    pictures: int = Field(
        8, ge=0, description="Pictures found by CLIP's text tower shown beside an answer."
    )
    foreign_dense_weight: float = Field(
        0.0,
        ge=0,
        description="Weight of the dense ranking for a query in a language the dense model "
        "was not trained on (embedding.dense_languages): such a ranking is mostly noise, and "
        "fusing it in would pull good keyword results down.",
    )
    sparse_query_terms: int | None = Field(
        10,
        ge=1,
        description="Long questions: the keyword (BM25) weight is scaled by min(1, this / the "
        "question's distinct keyword terms). BM25 adds up every term a passage shares with a "
        "wordy question, so its ranking drifts to passages that repeat the question's common "
        "words, while the dense model reads the sentence whole. None: off; SPLADE's expanded "
        "queries are not scaled (see bench/README.md).",
    )
    page_weight: float = Field(
        0.1,
        ge=0,
        description="Page context: each passage on a page (PDF, slide) gains this weight × the "
        "fused score of the best other passage found on the same page, so a page that two "
        "passages match (a statement's rows, its title) rises above one matched once. Passages "
        "without a page are not affected. 0: off. Chosen by both folds of both PDF dev sets "
        "(bench/retrieval_folds.py).",
    )
    page_keyword_weight: float = Field(
        0.3,
        ge=0,
        description="Page keywords: each passage on a page gains this weight × how well its "
        "whole page matches the question's keywords (BM25 over the page's text, as a share of "
        "the best score among the candidates' pages), on the fused scores' scale. A page often "
        "answers as a whole (a statement's title on top, the figure asked for in a table "
        "below) where no one passage holds every word. Needs page vectors "
        "(embedding.page_keywords). 0: off (and no page is scored).",
    )
    identifier_documents: int = Field(
        3,
        ge=0,
        description="Exact identifiers first: in a look-up (a query of at most 4 keyword "
        "terms), a word that mixes letters and digits (zq0042, "
        "A-113) or is written in capitals (a ticker) is rare when the passages the keyword "
        "search found hold it in at most this many documents; no passage that only the dense "
        "model found comes before one holding a rare identifier. 0: off.",
    )
    page_passages: int | None = Field(
        1,
        ge=1,
        description="Diversity: at most this many passages of one page (PDF, slide) come before "
        "the passages of pages not yet shown; the others follow, in order. The answerer reads "
        "the first top_k passages: five of one page leave out the pages beside it. None: off "
        "(chosen by bench/retrieval_folds.py).",
    )
    freshness_half_life_days: float | None = Field(
        None,
        gt=0,
        description="Favour recent documents: each passage's score gains freshness_weight × "
        "0.5^(age / half-life), its age counted from its document's date (a year in its title "
        "or file name, as a filing's period, else the file's modification time). Unset: off.",
    )
    freshness_weight: float = Field(
        0.1, ge=0, description="What a document dated today adds to a passage's score."
    )
    named_year_weight: float = Field(
        0.5,
        ge=0,
        description='A question that names a year ("in FY2022", "2022 Q2") prefers the '
        "documents of that year: a passage gains this weight when its document's file name "
        "names one of the question's years (a filing's period: PEPSICO_2022_10K.pdf), on the "
        "fused scores' scale (DBSF, min-max; RRF's are a hundredth of it: lower it there). 0: "
        "off (see bench/README.md).",
    )
    rerank_candidates: int = Field(50, ge=1, description="Fused candidates the reranker sees.")
    top_k: int = Field(8, ge=1, description="Passages an answer is built from.")
    min_score: float | None = Field(
        None,
        description="Passages scoring below this (rerank score, else fused score; with the "
        "page, freshness and named year scores added) are dropped.",
    )


class RerankSettings(BaseModel):
    model: str | None = Field(
        None,
        description="A cross-encoder: a fastembed name (Xenova/ms-marco-MiniLM-L-6-v2), a "
        "transformers sequence-classification id, or a local folder of either. Unset: the "
        "fused order stands.",
    )
    backend: Literal["auto", "fastembed", "transformers"] = Field(
        "auto",
        description="auto: fastembed for its known names and folders holding model.onnx, "
        "transformers otherwise.",
    )
    batch_size: int = Field(16, ge=1)


class AnswerSettings(BaseModel):
    backend: Literal["extractive", "openai", "transformers"] = Field(
        "extractive",
        description="extractive: the passages' most relevant sentences, cited, no LLM; "
        "openai: any OpenAI-compatible chat endpoint; transformers: a local causal LM.",
    )
    base_url: str | None = Field(
        None, description="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1."
    )
    api_key: str | None = None
    model: str | None = Field(
        None,
        description="The endpoint's model name, or a transformers model id or local folder.",
    )
    gguf_file: str | None = Field(None, description="A GGUF file inside the model folder.")
    max_new_tokens: int = Field(512, ge=1)
    temperature: float = Field(0.2, ge=0)
    extractive_sentences: int = Field(4, ge=1, description="Sentences an extractive answer quotes.")
    timeout_seconds: float = Field(120.0, gt=0)


class ServingSettings(BaseModel):
    host: str = "127.0.0.1"
    port: int = Field(7860, ge=1, le=65535)
    refresh_seconds: float = Field(
        5.0, gt=0, description="How often the page looks for a newer index."
    )
    max_upload_mb: float = Field(
        100.0, gt=0, description="Largest file the page accepts in an upload."
    )
    max_upload_files: int = Field(20, ge=1, description="Most files in one upload.")
    max_query_chars: int = Field(
        2000, ge=1, description="Longest question or search the page and the API accept."
    )
    max_k: int = Field(100, ge=1, description="Most passages one search API call may ask for.")


class UserSettings(BaseModel):
    """A user of the page and the search API (written by ``rag-pipeline user add``)."""

    password_hash: str | None = Field(
        None, description="scrypt hash of the password; None: signs in through the proxy only."
    )
    token_hash: str | None = Field(None, description="SHA-256 of the search API's bearer token.")
    workspaces: list[str] = Field(
        default_factory=list, description="Workspace ids the user may use; ['*']: all."
    )
    contribute: list[str] = Field(
        default_factory=list,
        description="Workspace ids where the user may upload files, and replace what they "
        "uploaded; ['*']: all. A user granted a workspace only to use it only reads.",
    )
    govern: list[str] = Field(
        default_factory=list,
        description="Workspace ids where the user may take documents and chunks out of search "
        "and put them back, and upload and replace any upload; ['*']: all.",
    )

    def may_use(self, workspace: str) -> bool:
        return "*" in self.workspaces or workspace in self.workspaces

    def may_contribute(self, workspace: str) -> bool:
        return self.may_govern(workspace) or (
            self.may_use(workspace) and ("*" in self.contribute or workspace in self.contribute)
        )

    def may_govern(self, workspace: str) -> bool:
        return self.may_use(workspace) and ("*" in self.govern or workspace in self.govern)


class AccessSettings(BaseModel):
    """Who may use the page and the search API. Nobody configured: loopback only, no sign-in."""

    users: dict[str, UserSettings] = Field(default_factory=dict)
    proxy_user_header: str | None = Field(
        None,
        description="A header naming the signed-in user, set by a trusted reverse proxy (e.g. "
        "X-Forwarded-User). Only for a server the proxy alone can reach: anyone who reaches it "
        "directly can send the header.",
    )
    free_sign_in_tries: int = Field(
        5,
        ge=1,
        description="Wrong passwords in a row, per user name and per client address, before "
        "each further try must wait (and is refused unchecked until then).",
    )
    sign_in_delay_seconds: float = Field(
        1.0, gt=0, description="The first wait after the free tries; it doubles each time."
    )
    sign_in_max_delay_seconds: float = Field(
        300.0, gt=0, description="The longest wait between two password tries."
    )
    session_hours: float = Field(
        12.0,
        gt=0,
        description="How long a browser stays signed in after the sign-in form (its session "
        "cookie's expiry). Sessions are kept in the server's memory: a restart signs everyone "
        "out.",
    )

    @property
    def configured(self) -> bool:
        return bool(self.users) or self.proxy_user_header is not None
