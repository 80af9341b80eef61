"""API-Bank information and utility APIs: calculator, date, history, stocks, documents, images, speech, wiki,
web search, e-mail, hotel booking, dictionary and translation.

Lookups read ``init_database/`` (History, Stock, QuestionAnswering, ImageCaptioning, SpeechRecognition, Wiki,
SearchEngine, Hotel). Dictionary and Translate called web services in the original (dictionaryapi.dev, Google
Translate); this runtime is offline, so they answer from the results recorded in the benchmark's dialogues
(tables ``recorded/Dictionary`` and ``recorded/Translate`` built by
`genenv.benchmarks.api_bank.apis.catalogue.load_tables`) and refuse other inputs with a clear exception.
"""
from __future__ import annotations

import ast
import operator
import re
from typing import Any

from genenv.benchmarks.api_bank.apis.base import (
    Api,
    ApiError,
    month_day,
    norm_date,
    register_api,
    require_text,
    strict_datetime,
)

__all__ = ["evaluate_formula", "recorded_key"]

TODAY = "2023-03-31"  # the benchmark's fixed "today" (its prompts say the current year is 2023)
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def evaluate_formula(formula: str) -> float:
    """Value of an arithmetic formula of numbers, ``+ - * /`` and parentheses, as a float.

    Parsed with `ast` (never ``eval``); anything else is ``invalid formula``.

    Raises:
        ApiError: not such a formula, or a division by zero.
    """
    text = str(formula).replace(" ", "")
    if not text or len(text) > 200 or not re.fullmatch(r"[0-9.+\-*/()]+", text):
        raise ApiError("invalid formula")

    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return float(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return -value(node.operand) if isinstance(node.op, ast.USub) else value(node.operand)
        raise ApiError("invalid formula")

    try:
        return value(ast.parse(text, mode="eval").body)
    except ZeroDivisionError:
        raise ApiError("float division by zero") from None
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise ApiError("invalid formula") from None


@register_api
class Calculator(Api):
    """``Calculator(formula)`` -> the value (float) of an arithmetic formula."""

    name = "Calculator"

    def run(self, rt, formula: str) -> Any:
        return evaluate_formula(formula)


@register_api
class GetToday(Api):
    """``GetToday()`` -> today's date, fixed at the benchmark's ``2023-03-31``."""

    name = "GetToday"

    def run(self, rt) -> Any:
        return TODAY


@register_api
class QueryHistoryToday(Api):
    """``QueryHistoryToday(date)`` (``MM-DD`` or ``YYYY-MM-DD``) -> ``"Title: .., Date: .., Description: .."`` lines
    of the events on that day (``History.json``)."""

    name, database = "QueryHistoryToday", "History"

    def run(self, rt, date: str) -> Any:
        key = month_day(date)
        table = rt.table("History")
        if key not in table:
            raise ApiError("The date is not in the database.")
        return [f"Title: {e['Title'].strip()}, Date: {e['Date'].strip()}, Description: {e['Description'].strip()}"
                for e in table[key]]


@register_api
class QueryStock(Api):
    """``QueryStock(stock_code, date)`` -> the closing price on that date (``Stock.json``)."""

    name, database = "QueryStock", "Stock"

    def run(self, rt, stock_code: str, date: str) -> Any:
        code = require_text(stock_code, "The stock code cannot be empty.").upper()
        day = norm_date(date)
        table = rt.table("Stock")
        if code not in table:
            raise ApiError("The stock code does not exist.")
        if day not in table[code]:
            raise ApiError("The stock price of this date is not maintained.")
        return table[code][day]


@register_api
class DocumentQA(Api):
    """``DocumentQA(url, question)`` -> ``"The question is too difficult to answer."`` for every document of
    ``QuestionAnswering.json``. This is the benchmark's behaviour: its lookup never matches a stored question, and
    every recorded DocumentQA result says so."""

    name, database = "DocumentQA", "QuestionAnswering"

    def run(self, rt, url: str, question: str) -> Any:
        question = require_text(question, "The question is empty.")
        table = rt.table("QuestionAnswering")
        if url.strip() not in table:
            raise ApiError("The document of this url failed to be processed.")
        return "The question is too difficult to answer."


@register_api
class ImageCaption(Api):
    """``ImageCaption(url)`` -> the caption of a known ``.jpg/.jpeg/.png`` image (``ImageCaptioning.json``)."""

    name, database = "ImageCaption", "ImageCaptioning"

    def run(self, rt, url: str) -> Any:
        url = url.strip()
        if not url.endswith((".jpg", ".jpeg", ".png")):
            raise ApiError("The url should end with .jpg, .jpeg or .png.")
        caption = next((e["caption"] for e in rt.table("ImageCaptioning") if e["url"] == url), None)
        if caption is None:
            raise ApiError("The image of this url failed to be processed.")
        return caption


@register_api
class SpeechRecognition(Api):
    """``SpeechRecognition(url)`` -> the transcript of a known ``.wav`` file (``SpeechRecognition.json``)."""

    name, database = "SpeechRecognition", "SpeechRecognition"

    def run(self, rt, url: str) -> Any:
        url = url.strip()
        if not url.endswith(".wav"):
            raise ApiError("The url should end with .wav.")
        table = rt.table("SpeechRecognition")
        if url not in table:
            raise ApiError("The audio of this url failed to be processed.")
        return table[url]


@register_api
class Wiki(Api):
    """``Wiki(keyword)`` -> ``{url, summary}`` of the article (``Wiki.json``, 8 articles)."""

    name, database = "Wiki", "Wiki"

    def run(self, rt, keyword: str) -> Any:
        key = keyword.replace("_", " ").strip().lower()
        table = rt.table("Wiki")
        if key not in table:
            raise ApiError("Keyword not found.")
        return {"url": table[key]["url"], "summary": table[key]["summary"]}


_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


@register_api
class SearchEngine(Api):
    """``SearchEngine(keyword)`` -> the two best documents of ``SearchEngine.json`` by BM25 (``rank_bm25``'s
    Okapi BM25 over the stored lower-cased tokens; results compared without order)."""

    name, database = "SearchEngine", "SearchEngine"

    def run(self, rt, keyword: str) -> Any:
        from rank_bm25 import BM25Okapi

        store = rt.table("SearchEngine")
        index = rt.memory.get("bm25")
        if index is None:
            index = rt.memory["bm25"] = BM25Okapi(store["tokenized_documents"])
        scores = index.get_scores(_TOKEN_RE.findall(keyword.strip().lower()))
        best = sorted(range(len(scores)), key=lambda i: -scores[i])[:2]
        return [dict(store["raw_documents"][i]) for i in best]


_EMAIL_RE = re.compile(r"^[a-z0-9]+[._]?[a-z0-9]+@\w+\.\w{2,3}$")


@register_api
class SendEmail(Api):
    """``SendEmail(receiver, subject, content)`` -> ``"success"`` (nothing is sent)."""

    name = "SendEmail"

    def run(self, rt, receiver: str, subject: str, content: str) -> Any:
        if not _EMAIL_RE.match(receiver.strip()):
            raise ApiError("Email address of the receiver is invalid.")
        require_text(subject, "Subject cannot be empty.")
        require_text(content, "Content cannot be empty.")
        return "success"


@register_api
class BookHotel(Api):
    """``BookHotel(hotel_name, check_in_time, check_out_time, room_count, adult_count, child_count)`` -> the new
    order id (``Hotel.json``: order id -> booking)."""

    name, database = "BookHotel", "Hotel"

    def run(self, rt, hotel_name: str, check_in_time: str, check_out_time: str, room_count: int,
            adult_count: int, child_count: int) -> Any:
        start, end = strict_datetime(check_in_time, "%Y-%m-%d"), strict_datetime(check_out_time, "%Y-%m-%d")
        if adult_count > 2 and room_count == 1:
            raise ApiError("The number of adults is greater than 2. Two rooms are ordered.")
        table = rt.table("Hotel")
        for order in table.values():
            if order["hotel_name"] != hotel_name:
                continue
            o_start = strict_datetime(order["check_in_time"], "%Y-%m-%d")
            o_end = strict_datetime(order["check_out_time"], "%Y-%m-%d")
            if o_start <= start < o_end or o_start < end <= o_end:
                raise ApiError("The room is not available.")
        order_id = str(len(table) + 1)
        table[order_id] = {"hotel_name": hotel_name, "check_in_time": check_in_time, "check_out_time": check_out_time,
                           "room_count": room_count, "adult_count": adult_count, "child_count": child_count}
        return order_id


class _Recorded(Api):
    """An API whose original called a web service: answered from results recorded in the benchmark data."""

    def lookup(self, rt, key: str) -> Any:
        table = rt.table(f"recorded/{self.name}")
        if key not in table:
            raise ApiError(f"{self.name} is offline here and has no recorded result for {key!r}")
        return table[key]


@register_api
class Dictionary(_Recorded):
    """``Dictionary(keyword)`` -> the word's meanings (recorded dictionaryapi.dev answers)."""

    name = "Dictionary"

    def run(self, rt, keyword: str) -> Any:
        return self.lookup(rt, recorded_key(self.name, {"keyword": keyword}))


@register_api
class Translate(_Recorded):
    """``Translate(src, src_lang, tgt_lang)`` -> the translation (recorded Google Translate answers)."""

    name = "Translate"

    def run(self, rt, src: str, src_lang: str | None = None, tgt_lang: str | None = None) -> Any:
        return self.lookup(rt, recorded_key(self.name, {"src": src, "tgt_lang": tgt_lang}))


_LANGUAGES = {"french": "fr", "spanish": "es", "german": "de", "english": "en", "chinese": "zh-cn",
              "japanese": "ja", "italian": "it", "korean": "ko", "russian": "ru", "portuguese": "pt"}


def recorded_key(api: str, arguments: dict[str, Any]) -> str:
    """The lookup key of a recorded web-service result: the keyword (lower-cased, ``_`` as space) for
    Dictionary; ``<target language code>|<source text>`` for Translate (language names mapped to codes,
    default ``en``)."""
    if api == "Dictionary":
        return str(arguments.get("keyword", "")).replace("_", " ").strip().lower()
    lang = str(arguments.get("tgt_lang") or "en").strip().lower()
    return f"{_LANGUAGES.get(lang, lang)}|{str(arguments.get('src', '')).strip()}"
