"""Deterministic fact extraction: the extraction prompt's guidelines without an LLM.

:class:`HeuristicExtractor` reads user and assistant messages clause by clause,
keeps first-person statements (and, from the assistant, statements about the
user in the second person) and rewrites them as short subjectless third-person
facts: "Hi, I'm Alex. I'm a vegetarian and allergic to nuts." gives "Name is
Alex", "Is vegetarian", "Allergic to nuts". English and German are rewritten;
for other languages a first-person statement is kept verbatim minus its pronoun.

Deliberate choices:

- "remind me that/to/about X" becomes "Wants to be reminded that/to/about X"
  (a request about the future, ``kind="fact"``); "remember that X", "don't
  forget that X" and "note that X" store X itself ("Allergic to nuts").
- Clauses that share the subject are split ("I became vegan and no longer eat
  pizza" gives "Became vegan" and "No longer eats pizza"); noun lists are not
  ("Likes apples and pears").
- "my" is dropped ("Prefers dark mode in all applications"); other first-person
  pronouns inside a fact become singular they/them (German: mich/mir -> sich).
- With a ``timestamp``, yesterday/today/tomorrow, "N days/weeks/months/years
  ago" and last/next/this week/month/year become absolute ("on 2024-05-07").
- Clauses over 60 words are skipped: they are no concise fact, and the bound
  keeps the work linear on very long input.
- A turn gives at most :data:`MAX_FACTS_PER_TURN` facts, the first ones (the cut
  is logged): each fact costs a reconciliation, and one long message can state
  thousands.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from datetime import date, datetime, timedelta

from memorist.model import Fact, Message
from memorist.policies.consolidation import derive_importance
from memorist.policies.text import preview
from memorist.roles.base import Extractor

logger = logging.getLogger("memorist")

#: The most facts one turn yields: every extractor's default, and what the ingest
#: pipeline keeps of any extractor's answer. The first ones are kept and the cut is
#: logged (:func:`first_facts`): each fact costs a reconciliation, and one message of
#: 100,000 characters can state thousands.
MAX_FACTS_PER_TURN = 50


def first_facts(facts: list[Fact], limit: int, source: str, *, found: str = "found", noun: str = "facts") -> list[Fact]:
    """The first ``limit`` of ``facts``; a longer list is cut, and the cut logged
    ("<source> <found> <n> <noun> in one turn": who found them, and how)."""
    if len(facts) <= limit:
        return facts
    logger.warning(
        "memorist: %s %s %d %s in one turn; keeping the first %d, dropping: %s",
        source, found, len(facts), noun, limit, preview("; ".join(f.text for f in facts[limit:]), 300),
    )
    return facts[:limit]


_MAX_CLAUSE_WORDS = 60
_MAX_FACT_WORDS = 40
_I = re.IGNORECASE

_Rewritten = list[tuple[str, "str | None"]]  # (fact text, kind or None to infer it from the text)


def _ws(words: str) -> frozenset[str]:
    return frozenset(words.split())


# --- lexicons ----------------------------------------------------------------------------------------
# Stop-word votes for language detection; words both languages share ("in") are left out.
_EN_VOTES = _ws("i i'm i've i'd i'll me my the a an and is am are was it to of that this with for have "
                "has not don't you your hi hello what can do so but like love live work name")
_DE_VOTES = _ws("ich bin mein meine meinen und der die das ist nicht ein eine einen mit zu von auf für habe "
                "hallo auch sehr gegen kein keine keinen mag wohne heiße heisse arbeite du dich mich mir als bitte")
_EN_VERBS = _ws("adore attend avoid bake become believe bike build buy care climb code collect cook cycle "
                "dance design develop dislike do draw drink drive eat enjoy exercise feel fish follow get go "
                "grow hate have hike hope keep know learn like listen live love make manage miss need own "
                "paint plan play practice practise prefer read ride run sing ski sleep speak spend stay "
                "struggle study support surf swim take teach think train travel try use visit volunteer walk "
                "want watch wear wish work write")
_EN_PAST = _ws("ate became began bought brought built came caught chose did drank drove fell felt fought found "
               "flew forgot got gave went grew had heard held hurt kept knew left lost made meant met paid put "
               "quit ran rode rose said saw sold sent set shot sang sat slept spoke spent stood stole swam took "
               "taught told thought threw understood woke wore won wrote was were been")
_EN_MODALS = _ws("can could should might may must shall will would")
_EN_ADVERBS = _ws("also really actually absolutely definitely totally truly usually often sometimes always "
                  "never rarely seldom generally normally typically currently recently just still already "
                  "mostly mainly occasionally regularly now")
# "I'm a vegetarian" -> "Is vegetarian" (identity adjectives), but "I'm a teacher" -> "Is a teacher".
_EN_IDENTITY = _ws("vegetarian vegan pescatarian pescetarian flexitarian diabetic celiac coeliac teetotaler "
                   "teetotaller non-smoker nonsmoker smoker")
_EN_ADJ = _ws("allergic intolerant married single divorced widowed retired pregnant engaged vegetarian vegan "
              "diabetic tired busy sick afraid scared interested lactose gluten")
# Capitalised words after "I'm" that are not names ("I'm Italian").
_EN_NON_NAMES = _ws("american british english german french italian spanish chinese japanese indian canadian "
                    "mexican brazilian russian dutch swiss austrian polish irish scottish welsh australian "
                    "korean turkish greek swedish norwegian danish finnish portuguese vietnamese thai egyptian "
                    "nigerian israeli iranian pakistani jewish muslim christian catholic buddhist hindu atheist "
                    "european asian african latino not so very just really from in at on ok okay sure sorry")
_PREPS = _ws("to of in on at with about for from by into")
# Words that carry no information: a fact whose remainder is only these is small talk ("Loves it").
_VACUOUS = _ws("a an the to of in on at for with from by about as and or but it that this these those so too "
               "there here one thing things something anything everything nothing stuff what how why yes no "
               "not ok okay sure fine good great nice cool well right sorry glad happy thanks thank help "
               "question questions know see understand agree guess think mean wonder wondering curious ready "
               "back done again now just really very much lot bit little please same more all welcome "
               "pleasure bad try trying do doing be been am is are was were has have had will would can could "
               "today tonight tomorrow yesterday s t d ll m ve re they them their es das gut ja nein danke "
               "bitte klar toll super schön sicher auch hier da gerne heute")

_DE_IRREG = {"bin": "ist", "habe": "hat", "hab": "hat", "werde": "wird", "esse": "isst", "lese": "liest",
             "spreche": "spricht", "fahre": "fährt", "sehe": "sieht", "nehme": "nimmt", "gebe": "gibt",
             "helfe": "hilft", "treffe": "trifft", "schlafe": "schläft", "laufe": "läuft", "trage": "trägt",
             "vergesse": "vergisst", "fange": "fängt", "halte": "hält", "lasse": "lässt", "wasche": "wäscht",
             "empfehle": "empfiehlt", "werfe": "wirft", "tue": "tut", "heiße": "heißt", "heisse": "heisst"}
# Present-tense verbs whose stem ends in -t; any other "-te" form is a preterite (1sg == 3sg).
_DE_T_STEMS = _ws("arbeite warte teste bitte starte antworte leiste koste achte rate leite bereite begleite "
                  "unterrichte berichte erwarte gestalte beobachte betrachte verwalte rette wette")
_DE_FINITE = _ws("bin habe hab war hatte mag kann will muss darf soll möchte werde würde weiß wohne arbeite "
                 "lebe liebe esse trinke spiele lerne studiere spreche koche lese fahre gehe hasse brauche "
                 "suche mache reise komme treibe höre schaue bevorzuge interessiere heiße fange plane male")
# German nouns are capitalised too: "Ich bin Lehrerin" is not a name, "Ich bin Anna" is.
_DE_IDENTITY = _ws("vegetarier vegetarierin veganer veganerin lehrer lehrerin student studentin arzt ärztin "
                   "ingenieur ingenieurin rentner rentnerin schüler schülerin mutter vater single deutscher "
                   "deutsche österreicher österreicherin schweizer schweizerin koch köchin fan anfänger")
_DE_NOUN_SUFFIXES = ("erin", "istin", "entin", "antin", "eurin", "ier", "ist", "eur", "iker", "ling", "ler",
                     "rer")
_DE_LOWER_LEAD = _ws("seit gestern heute morgen vorgestern übermorgen letztes letzte letzten nächste nächsten "
                     "nächstes jetzt inzwischen seitdem früher damals am im in an auf bei mit nach vor zur zum "
                     "dieses diese diesen jeden jede jedes manchmal oft immer meistens normalerweise bald "
                     "gerade endlich zurzeit momentan derzeit abends morgens vergangene vergangenen")
_DE_DETERMINERS = _ws("der die das den dem des einen einem einer kein keine keinen mein meine meinen")
_DE_DU = {"bist": "bin", "hast": "habe", "isst": "esse", "heißt": "heiße", "weißt": "weiß", "magst": "mag",
          "wirst": "werde", "warst": "war", "hattest": "hatte"}

_MONTHS = {"en": ["January", "February", "March", "April", "May", "June", "July", "August", "September",
                  "October", "November", "December"],
           "de": ["Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August", "September",
                  "Oktober", "November", "Dezember"]}
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "einem": 1, "einer": 1, "zwei": 2, "drei": 3, "vier": 4,
            "fünf": 5, "sechs": 6, "sieben": 7, "acht": 8, "neun": 9, "zehn": 10}

# --- patterns (all anchored or simple, so no catastrophic backtracking) ------------------------------
_TOKEN = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")
_APOSTROPHES = str.maketrans({"’": "'", "‘": "'", "ʼ": "'", "`": "'"})
_SENT_END = re.compile(r"(?<=[.!?…]) ")
_ABBREV = _ws("st mr mrs ms dr prof jr sr vs e.g i.e z.b bzw ca nr str no")
_BULLET = re.compile(r"(?:[-*•>]+|\d{1,3}[.)]) ")
_CLAUSE_SEP = re.compile(r" ?[;—–] ?| - |: ")
_DAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_EN_TIME = (r"(?:yesterday|today|tonight|tomorrow|nowadays|these days|lately|recently|currently|now"
            rf"|(?:last|next|this) (?:week|weekend|month|year|night|summer|winter|spring|fall|autumn|{_DAYS})"
            r"|(?:in|since|during|until) (?:\d{4}|january|february|march|april|may|june|july|august"
            rf"|september|october|november|december)|on (?:{_DAYS}|weekends)"
            r"|(?:\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten) (?:day|week|month|year)s? ago)")
_EN_TIME_ONLY = re.compile(_EN_TIME, _I)
_EN_LEAD_TIME = re.compile(rf"(?P<t>{_EN_TIME}),? (?P<rest>(?:i\b|i'|my ).*)", _I)
_EN_FILLER = re.compile(r"(?:(?:and|but|so|or|then|also|plus|because|cause|although|though|well|oh|ah|"
                        r"actually|anyway|anyways|btw|by the way|honestly|basically|ok|okay|yeah|yes|um|uh|"
                        r"hmm|hey|hi|hello)\b[ ,!.]*)+", _I)
# A comma piece starting like this opens a new clause; any other piece continues the previous one.
_EN_STARTER = re.compile(r"(?:(?:and|but|so|or|then|also|plus|because) )?(?:i\b|i'|my\b|please\b|remind\b|"
                         r"remember\b|don't\b|do not\b|call me\b|you\b|you'|your\b|can\b|could\b|would\b|"
                         r"will\b|do\b|does\b|did\b|is\b|are\b|what|how\b|why\b|when\b|where\b|who\b|"
                         r"which\b|thank)", _I)
_EN_FIRST_PERSON = re.compile(r"(?:i\b|i'|my\b|me\b|mine\b|myself\b|we\b|we'|us\b|our\b|let me\b|let's\b)", _I)
_EN_COPULA = re.compile(r"i(?:'m| am| was|'ve been| have been)\b", _I)
_EN_AND = re.compile(r" (?:and|but) ", _I)
_EN_SHARED_LEAD = re.compile(r"(?:(?:no longer|don't|do not|didn't|did not|never|can't|cannot|won't|also|"
                             r"still|now|then|really|always) )+", _I)
_EN_REMIND = re.compile(r"(?:(?:can|could|would|will) you )?(?:please )?remind me(?: again| later| please)? "
                        r"(?:(?P<conj>that|to|about|of) )?(?P<x>.+)", _I)
_EN_REMEMBER = re.compile(r"(?:(?:can|could|would|will) you )?(?:please )?(?:remember|note|keep in mind|"
                          r"don't forget|do not forget|never forget|make a note)(?P<that> that)?:? (?P<x>.+)", _I)
_EN_NAME = re.compile(r"(?:my name(?:'s| is)|(?:you can |please |just )?call me|(?:people|everyone|friends) "
                      r"call me|i go by|i(?:'m| am) called) (?P<n>.+)", _I)
_EN_IM = re.compile(r"i(?:'m| am) (?P<n>.+)", _I)
_EN_HEADS = [(re.compile(p, _I), h) for p, h in (
    (r"i(?:'m| am) no longer\b", "Is no longer"), (r"i(?:'m| am) not\b|i ain't\b", "Is not"),
    (r"i (?:was not|wasn't)\b", "Was not"), (r"i was\b", "Was"),
    (r"i (?:have not|haven't)\b|i've not\b", "Has not"), (r"i(?:'ve| have) got\b", "Has"),
    (r"i(?:'ve| have)\b", "Has"), (r"i(?:'d| had) been\b", "Had been"), (r"i had\b", "Had"),
    (r"i (?:would not|wouldn't)\b", "Would not"), (r"i(?:'d| would)\b", "Would"),
    (r"i (?:will not|won't)\b", "Will not"), (r"i(?:'ll| will)\b", "Will"),
    (r"i (?:do not|don't|dont)\b", "Does not"), (r"i (?:did not|didn't|didnt)\b", "Did not"),
    (r"i (?:cannot|can't|cant|can not)\b", "Cannot"), (r"i (?:could not|couldn't)\b", "Could not"),
    (r"i (?:should not|shouldn't)\b", "Should not"), (r"i used to\b", "Used to"),
    (r"i (?:can|could|should|might|may|must|shall)\b", ""))]  # "": keep the modal itself
_EN_INNER = [(re.compile(p, _I), r) for p, r in (
    (r"(?<![\w.])i(?:'m| am)\b", "they're"), (r"(?<![\w.])i was\b", "they were"),
    (r"(?<![\w.])i(?='|\b)(?![.\w])", "they"), (r"\bme\b", "them"), (r"\bmyself\b", "themselves"),
    (r"\bmine\b", "theirs"), (r"\bmy\s+", ""))]
_EN_SWAP = [(re.compile(p, _I), r) for p, r in (
    (r"\byou aren't\b", "I'm not"), (r"\byou weren't\b", "I wasn't"), (r"\byou(?:'re| are)\b", "I'm"),
    (r"\byou were\b", "I was"), (r"\byourself\b", "myself"), (r"\byours\b", "mine"), (r"\byour\b", "my"),
    (r"^you\b|(?:(?<=\bthat )|(?<=\band )|(?<=\bbut ))you\b", "I"), (r"\byou\b", "me"))]
_EN_REPORT = re.compile(r"(?:as )?you(?:'ve)? (?:mentioned|said|told me|noted|shared|stated|indicated|"
                        r"explained)(?: earlier| before| previously)?,?(?: that)? (?P<x>.+)", _I)
_EN_ADVICE = re.compile(r"you(?:'ll|'d| will| would| can| could| should| might| may| must| need to| ought)\b",
                        _I)
# Talk about the conversation itself ("I was wondering if...", "I have a question"), not about the user.
_EN_META = re.compile(r"(?:(?:is |was )?(?:just )?(?:wonder(?:s|ing)?|curious|asking)(?: (?:if|whether|how|what|"
                      r"why|when|where|who)\b|$)|has (?:a|another|one more) question\b|(?:wants|would like) to "
                      r"(?:know|ask)\b)", _I)
_EN_PREFERENCE = re.compile(r"(?:(?:really|also|absolutely|still|always|truly|no longer|never) )*(?:loves?|"
                            r"likes?|enjoys?|prefers?|hates?|dislikes?|adores?|wants?|would (?:like|love|"
                            r"prefer)|does not (?:like|enjoy|want|care for)|is (?:not )?(?:a )?(?:big |huge )?"
                            r"fan of|is into|cannot stand)\b|.*\bfavou?rites?\b", _I)

_DE_FILLER = re.compile(r"(?:(?:und|aber|also|übrigens|außerdem|ach|naja|ja|nein|hallo|hi|hey|ok|okay|"
                        r"eigentlich|denn|doch|oh|deshalb|deswegen|auch)\b[ ,!.]*)+", _I)
_DE_STARTER = re.compile(r"(?:(?:und|aber|denn|oder|doch) )?(?:ich\b|mein|bitte\b|erinner|merk|vergiss|nenn|"
                         r"kannst\b|könntest\b|was\b|wie\b|warum\b|wann\b|wo\b|wer\b|welche|du\b|dein|"
                         r"danke|weil\b|obwohl\b|wenn\b|da\b)", _I)
_DE_REMIND = re.compile(r"(?:bitte )?erinnere? mich(?: bitte)?(?: (?P<an>an)(?! dass))?(?: daran)?,? "
                        r"(?:dass )?(?P<x>.+)", _I)
_DE_REMEMBER = re.compile(r"(?:bitte )?(?:merk(?:e)? dir|vergiss nicht|denk(?:e)? daran)(?: bitte)?,? "
                          r"(?P<dass>dass )?(?P<x>.+)", _I)
_DE_NAME = re.compile(r"(?:ich hei(?:ß|ss)e|mein name ist|man nennt mich|nenn(?:t)? mich) (?P<n>.+)", _I)
# Verb-second order: "Seit Mai bin ich Vegetarierin" -> "ich bin seit Mai Vegetarierin".
_DE_INVERSION = re.compile(r"(?P<adv>[^\s,]+(?: [^\s,]+){0,3}?) (?P<v>[^\s,]+) ich\b ?(?P<rest>.*)", _I)
_DE_POSSESSIVE = re.compile(r"mein(?:e[mnrs]?)? (?P<rest>.+)", _I)
_DE_INNER = [(re.compile(p, _I), r) for p, r in ((r"\bmi(?:ch|r)\b", "sich"), (r"\bmein(?:e[mnrs]?)?\s+", ""))]
_DE_PREFERENCE = re.compile(r"(?:(?:sehr|wirklich|auch|total|nicht mehr) )*(?:mag|liebt|bevorzugt|hasst|"
                            r"möchte|will|genießt|steht auf)\b|.*\b(?:lieblings|gerne?\b)", _I)
_STRAY_FIRST_PERSON = re.compile(r"\bI\b|\b[Mm][ey]\b")
_OTHER_FIRST_PERSON = re.compile(r"(?:(?:je|yo|io|ik|eu|jag|jeg) |j')(?P<rest>\S.*)", _I)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _sub_all(rules: list[tuple[re.Pattern[str], str]], text: str) -> str:
    for pattern, repl in rules:
        text = pattern.sub(repl, text)
    return text


def _strip_lead(pattern: re.Pattern[str], text: str) -> str:
    return pattern.sub("", text, count=1) if pattern.match(text) else text


# --- segmentation ------------------------------------------------------------------------------------
def _detect_language(text: str) -> str:
    en = de = 0
    for i, match in enumerate(_TOKEN.finditer(text.lower())):
        if i >= 3000:  # enough evidence; keeps detection cheap on huge messages
            break
        en += match.group() in _EN_VOTES
        de += match.group() in _DE_VOTES
    return "de" if de > en else "en" if en else "other"


def _sentences(text: str) -> Iterator[str]:
    for line in text.splitlines():
        buffer: list[str] = []
        for piece in _SENT_END.split(" ".join(line.split())):
            buffer.append(piece)
            last = piece.rsplit(" ", 1)[-1].lower()
            if last.endswith(".") and last.rstrip(".") in _ABBREV:
                continue  # "St. Mary's" is no sentence end
            sentence, buffer = " ".join(buffer), []
            yield _strip_lead(_BULLET, sentence)
        if buffer:
            yield " ".join(buffer)


def _clauses(sentence: str, lang: str) -> list[str]:
    """Split at dashes, semicolons and colons, and at commas only where a new clause starts."""
    starter = _DE_STARTER if lang == "de" else _EN_STARTER
    out: list[str] = []
    for part in _CLAUSE_SEP.split(sentence):
        merged: list[list[str]] = []  # lists, not strings: joining once keeps long input linear
        pending_time = ""
        for piece in (p.strip() for p in part.split(",")):
            if not piece:
                continue
            if lang == "en" and _EN_TIME_ONLY.fullmatch(piece):
                pending_time = piece  # "Yesterday, I went to Rome": the time belongs to the next clause
                continue
            if pending_time:
                piece, pending_time = f"{pending_time} {piece}", ""
            if not merged or starter.match(piece):
                merged.append([piece])
            else:
                merged[-1].append(piece)
        if pending_time and merged:
            merged[-1][-1] += " " + pending_time
        out.extend(", ".join(pieces) for pieces in merged)
    return out


def _name_value(text: str) -> tuple[str, str]:
    """Split "Alex Smith from Berlin" into the name ("Alex Smith") and the rest ("from Berlin")."""
    words = text.split()
    name: list[str] = []
    for word in words[:4]:
        bare = word.strip(".,!?;:")
        if not bare or not (bare[0].isupper() or bare.lower() in ("van", "von", "de", "da", "del", "di", "le")):
            break
        name.append(bare)
        if bare != word:
            break
    name = name or [words[0].strip(".,!?;:")] if words else []
    rest = " ".join(words[len(name):])
    # Keep an appositive's comma: "Alex, a nurse" -> (Alex, ", a nurse").
    return " ".join(name), (", " + rest if rest and words[len(name) - 1].endswith(",") else rest)


# --- English -----------------------------------------------------------------------------------------
def _en_3sg(verb: str) -> str:
    low = verb.lower()
    if low in _EN_PAST or low in _EN_MODALS or (low.endswith("ed") and not low.endswith("eed")):
        return verb
    if low in ("have", "do", "go", "be"):
        return {"have": "has", "do": "does", "go": "goes", "be": "is"}[low]
    if low.endswith("y") and len(low) > 2 and low[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + ("es" if low.endswith(("s", "sh", "ch", "x", "z", "o")) else "s")


def _en_split(clause: str) -> list[str]:
    """Split "I'm a vegetarian and allergic to nuts" into clauses that share the subject."""
    copula = _EN_COPULA.match(clause)
    for match in _EN_AND.finditer(clause):
        head, tail = clause[: match.start()], clause[match.end():]
        words = _strip_lead(_EN_SHARED_LEAD, tail).split()
        if words and re.match(r"(?:i\b|i'|my$)", words[0], _I):
            return [head, *_en_split(tail)]  # "... and I love hiking", "... but now I live in Berlin"
        if not words or (len(head.split()) < 3 and not copula) or re.search(r"\bto \S+$", head, _I):
            continue  # "I live and work in Berlin", "I like to read and write"
        first = words[0].lower()
        if _EN_SHARED_LEAD.match(tail) or (len(words) > 1 and (
                first in _EN_VERBS or first in _EN_PAST or (first.endswith("ed") and not copula))):
            return [head, *_en_split("I " + tail)]  # "... and no longer eat pizza"
        if not copula:
            continue
        predicate = head[copula.end():].split()
        adjective = (first in _EN_ADJ or re.search(r"(?:ic|ous|ful|ive|able|ible|ant|ent|less)$", first)) and (
            len(words) == 1 or words[1].lower() in _PREPS)
        progressive = first.endswith("ing") and predicate[:1] != [] and predicate[0].endswith("ing")
        if first in ("a", "an") or adjective or progressive:
            return [head, *_en_split(clause[: copula.end()] + " " + tail)]  # "... and allergic to nuts"
    return [clause]


def _en_statement(clause: str) -> _Rewritten:
    """Rewrite one English first-person clause; a leading time phrase moves to the end."""
    clause = _strip_lead(_EN_FILLER, clause)
    suffix = ""
    if lead := _EN_LEAD_TIME.fullmatch(clause):
        clause, suffix = lead["rest"], " " + lead["t"].lower()
    return [(text + suffix, kind) for text, kind in _en_core(clause) if text]


def _en_core(clause: str) -> _Rewritten:
    if m := _EN_REMIND.match(clause):
        if not m["conj"] and re.match(r"(?:what|how|why|when|where|who|which|if)\b", m["x"], _I):
            return []  # "remind me what 1/2 + 1/3 is": a question, not a reminder
        return [(f"Wants to be reminded {(m['conj'] or 'that').lower()} {_sub_all(_EN_INNER, m['x'])}", "fact")]
    if m := _EN_REMEMBER.match(clause):
        if _EN_FIRST_PERSON.match(m["x"]):
            return _en_statement(m["x"])
        return [(_cap(_sub_all(_EN_INNER, m["x"])), None)] if m["that"] else []
    if m := _EN_NAME.match(clause):
        return [(f"Name is {_name_value(m['n'])[0]}", "fact")]
    if (m := _EN_IM.match(clause)) and m["n"][:1].isupper():
        name, rest = _name_value(m["n"])
        if name.split()[0].lower() not in _EN_NON_NAMES and "'" not in name and (
                not rest or rest.startswith(("from ", ", "))):
            return [(f"Name is {name}", "fact"), *(_en_core("I'm " + rest.lstrip(", ")) if rest else [])]
    if re.match(r"my ", clause, _I):
        return [(_cap(_sub_all(_EN_INNER, clause[3:])), None)]
    if (m := _EN_IM.match(clause)) and not re.match(r"(?:no longer|not)\b", m["n"], _I):
        words = m["n"].split()
        if len(words) > 1 and words[0].lower() in ("a", "an") and words[1].lower().strip(".,") in _EN_IDENTITY:
            words = words[1:]
        rest = _sub_all(_EN_INNER, " ".join(words))
        if re.match(r"(?:allergic|intolerant|(?:lactose|gluten)[- ]intolerant)\b", rest, _I):
            return [(_cap(rest), None)]  # a fact reads "Allergic to nuts", not "Is allergic to nuts"
        return [("Is " + rest, None)]
    for pattern, head in _EN_HEADS:
        if m := pattern.match(clause):
            head = head or _cap(clause[2: m.end()].strip())
            return [(f"{head} {_sub_all(_EN_INNER, clause[m.end():].strip())}".strip(), None)]
    if not re.match(r"i ", clause, _I):
        return []
    words, adverbs = clause.split()[1:], []
    while words and (words[0].lower() in _EN_ADVERBS or [w.lower() for w in words[:2]] == ["no", "longer"]):
        if words[0].lower() == "no":
            adverbs.append("no longer")
            words = words[1:]
        elif words[0].lower() not in ("also", "actually"):  # discourse words, not part of the fact
            adverbs.append(words[0])
        words = words[1:]
    if not words or not words[0].isalpha():
        return []  # "I <3 pizza", a bare "I"
    if len(words) > 2 and words[1].lower() in ("and", "or") and words[2].lower() in _EN_VERBS:
        words[2] = _en_3sg(words[2])  # "I live and work in Berlin" -> "Lives and works in Berlin"
    return [(_cap(" ".join([*adverbs, _en_3sg(words[0]), _sub_all(_EN_INNER, " ".join(words[1:]))])), None)]


def _en_clause(clause: str, role: str, question: bool) -> _Rewritten:
    if role == "assistant":
        clause = _strip_lead(_EN_FILLER, clause)
        if question or _EN_FIRST_PERSON.match(clause):
            return []  # the assistant asking, or talking about itself ("I'll remember that")
        if m := _EN_REPORT.match(clause):
            clause = m["x"]  # "You mentioned you live in Berlin"
        if (not re.match(r"you\b|you'|your\b", clause, _I) or _EN_ADVICE.match(clause)
                or re.search(r"\b(?:i|me|my|mine|we|us|our)\b", clause, _I)):
            return []
        clause = _sub_all(_EN_SWAP, clause)  # second person about the user -> first person, then as usual
    out: _Rewritten = []
    for part in _en_split(clause):
        for text, kind in _en_statement(part):
            if role == "user" and re.search(r"\byou(?:r|rs|rself)?\b", text, _I):
                continue  # about the conversation with the assistant, not about the user
            if not _EN_META.match(text):
                out.append((text, kind))
    return out


# --- German ------------------------------------------------------------------------------------------
def _de_3sg(verb: str) -> str:
    low = verb.lower()
    if low in _DE_IRREG:
        return _DE_IRREG[low]
    for prefix in ("ver", "be", "er", "ent", "emp", "zer", "über", "unter"):
        if low.startswith(prefix) and low[len(prefix):] in _DE_IRREG and len(low) - len(prefix) > 3:
            return prefix + _DE_IRREG[low[len(prefix):]]
    if not low.endswith("e") or (low.endswith("te") and low not in _DE_T_STEMS):
        return low  # modals and preterites: first and third person singular are the same
    stem = low[:-1]
    if stem.endswith(("t", "d")) or re.search(r"(?:[^aeiouäöülrhmn]|ch)[mn]$", stem):
        return stem + "et"  # arbeitet, findet, rechnet, atmet
    return stem + "t"


def _de_split(clause: str) -> list[str]:
    copula = re.match(r"ich (?:bin|war)\b", clause, _I)
    for match in re.finditer(r" (?:und|aber) ", clause):
        head, tail = clause[: match.start()], clause[match.end():]
        first = tail.split()[0].lower() if tail.split() else ""
        if first == "ich" or _DE_POSSESSIVE.match(tail):
            return [head, *_de_split(tail)]
        if first in _DE_FINITE or first in _DE_IRREG:
            return [head, *_de_split("ich " + tail)]
        # Lower case after "ich bin ... und" is an adjective ("allergisch"); a capital is a noun list.
        if copula and tail[:1].islower() and first not in _DE_DETERMINERS:
            return [head, *_de_split(clause[: copula.end()] + " " + tail)]
    return [clause]


def _de_core(clause: str) -> _Rewritten:
    if m := _DE_REMIND.match(clause):
        x = _sub_all(_DE_INNER, m["x"])
        if m["an"]:
            return [(f"Möchte an {x} erinnert werden", "fact")]
        return [(f"Möchte daran erinnert werden, dass {x}", "fact")]
    if m := _DE_REMEMBER.match(clause):
        x, words = m["x"], m["x"].split()
        if words and words[0].lower() == "ich" and len(words) > 2:
            x = " ".join(["ich", words[-1], *words[1:-1]])  # verb-final after "dass"
        if re.match(r"(?:ich|mein)", x, _I):
            return _de_clause(x, "user", False)
        return [(_cap(_sub_all(_DE_INNER, x)), None)] if m["dass"] else []
    if m := _DE_NAME.match(clause):
        return [(f"Name ist {_name_value(m['n'])[0]}", "fact")]
    if (m := _DE_INVERSION.fullmatch(clause)) and not re.match(r"ich\b", clause, _I):
        verb, adv = m["v"].lower(), m["adv"]
        if adv.lower() in ("außerdem", "auch", "übrigens", "deshalb", "also"):
            adv = ""
        elif adv.split()[0].lower() in _DE_LOWER_LEAD:
            adv = adv[0].lower() + adv[1:]  # a sentence-initial capital, not a noun
        if verb in _DE_FINITE or verb in _DE_IRREG or (verb.endswith("e") and m["v"].islower()):
            clause = " ".join(w for w in ("ich", m["v"], adv, m["rest"]) if w)
    if m := _DE_POSSESSIVE.match(clause):
        return [(_cap(_sub_all(_DE_INNER, m["rest"])), None)]
    words = clause.split()
    if len(words) < 2 or words[0].lower() != "ich" or not words[1].isalpha():
        return []
    rest = _sub_all(_DE_INNER, " ".join(words[2:]))
    if words[1].lower() != "bin":
        return [(_cap(f"{_de_3sg(words[1])} {rest}".strip()), None)]
    names = [w.strip(".,!") for w in rest.split()]
    if len(names) in (1, 2) and all(
            w[:1].isupper() and w.lower() not in _DE_IDENTITY and not w.lower().endswith(_DE_NOUN_SUFFIXES)
            for w in names):
        return [(f"Name ist {' '.join(names)}", "fact")]
    if len(names) > 1 and names[0].lower() in ("ein", "eine") and names[1].lower() in _DE_IDENTITY:
        rest = " ".join(rest.split()[1:])
    if re.match(r"(?:allergisch|laktoseintolerant|glutenintolerant|intolerant|unverträglich)\b", rest, _I):
        return [(_cap(rest), None)]
    return [("Ist " + rest, None)]


def _de_clause(clause: str, role: str, question: bool) -> _Rewritten:
    clause = _strip_lead(_DE_FILLER, clause)
    if role == "assistant":
        if question or re.match(r"(?:ich|mein|wir|unser|du (?:solltest|könntest|kannst|musst))\b", clause, _I):
            return []  # the assistant asking, talking about itself, or giving advice
        if m := re.match(r"du (\S+)(.*)", clause, _I):
            verb = m[1].lower()
            verb = _DE_DU.get(verb) or (verb[:-3] + "e" if verb.endswith("est")
                                        else verb[:-2] + "e" if verb.endswith("st") else verb)
            clause = f"ich {verb}{m[2]}"
        elif re.match(r"dein(?:e[mnrs]?)? ", clause, _I):
            clause = "mein" + clause[4:]
        else:
            return []
        clause = re.sub(r"\bdi(ch|r)\b", r"mi\1", clause, flags=_I)
    out: _Rewritten = []
    for part in _de_split(clause):
        for text, kind in _de_core(part):
            if re.search(r"\b(?:ich|du|dich|dir|dein\w*)\b", text, _I):
                # A subordinate clause ("..., weil ich ... bin") we cannot rewrite: keep the main clause.
                text = text[: text.rfind(",")] if "," in text else ""
            if text:
                out.append((text, kind))
    return out


def _other_clause(clause: str, role: str, question: bool) -> _Rewritten:
    # Unsupported language: keep a clearly first-person statement's remainder verbatim.
    m = _OTHER_FIRST_PERSON.match(clause)
    if role != "user" or question or not m or len(m["rest"].split()) < 2:
        return []
    return [(_cap(m["rest"]), None)]


# --- dates -------------------------------------------------------------------------------------------
def _span(day: date, unit: str, offset: int, lang: str) -> str:
    """Absolute wording for ``offset`` weeks, months or years from ``day``."""
    if unit.startswith(("week", "woche")):
        monday = day - timedelta(days=day.weekday()) + timedelta(weeks=offset)
        return f"in the week of {monday}" if lang == "en" else f"in der Woche vom {monday}"
    if unit.startswith(("month", "monat")):
        year, index = divmod(day.month - 1 + offset, 12)
        return f"{'in' if lang == 'en' else 'im'} {_MONTHS[lang][index]} {day.year + year}"
    return f"in {day.year + offset}" if lang == "en" else f"im Jahr {day.year + offset}"


def _date_rules(lang: str) -> list[tuple[re.Pattern[str], Callable[[re.Match[str], date], str]]]:
    on = "on" if lang == "en" else "am"

    def at(offset: int) -> Callable[[re.Match[str], date], str]:
        return lambda m, d: f"{on} {d + timedelta(days=offset)}"

    def ago(m: re.Match[str], d: date) -> str:
        n, unit = _NUMBERS.get(m["n"].lower()) or int(m["n"]), m["u"].lower()
        return f"{on} {d - timedelta(days=n)}" if unit.startswith(("day", "tag")) else _span(d, unit, -n, lang)

    def relative(m: re.Match[str], d: date) -> str:
        which = m["w"].lower()
        offset = -1 if which.startswith(("last", "letzt", "vergangen")) else 1 if which[0] == "n" else 0
        return _span(d, m["u"].lower(), offset, lang)

    if lang == "de":
        return [(re.compile(p, flags), f) for p, flags, f in (
            (r"\bvorgestern\b", _I, at(-2)), (r"\bübermorgen\b", _I, at(2)),
            (r"\bgestern(?: (?:abend|früh))?\b", _I, at(-1)),
            (r"\bheute(?: (?:abend|morgen|früh|nachmittag))?\b", _I, at(0)),
            (r"(?<!guten )\bmorgen\b(?!s)", 0, at(1)),  # lower case only: "Morgen" is the morning
            (r"\bvor (?P<n>\d{1,3}|einem|einer|zwei|drei|vier|fünf|sechs|sieben|acht|neun|zehn) "
             r"(?P<u>tag(?:en)?|woche(?:n)?|monat(?:en)?|jahr(?:en)?)\b", _I, ago),
            (r"\b(?P<w>letzte[nrs]?|vergangene[nrs]?|nächste[nrs]?|diese[nrs]?) (?P<u>woche|monat|jahr)\b",
             _I, relative))]
    return [(re.compile(p, _I), f) for p, f in (
        (r"\b(?:on )?the day before yesterday\b", at(-2)), (r"\b(?:on )?the day after tomorrow\b", at(2)),
        (r"\b(?:on )?yesterday\b|\blast night\b", at(-1)), (r"\b(?:on )?tomorrow\b", at(1)),
        (r"\b(?:on )?(?:today|tonight|this (?:morning|afternoon|evening))\b", at(0)),
        (r"\b(?P<n>\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten) "
         r"(?P<u>days?|weeks?|months?|years?) ago\b", ago),
        (r"(?<!the )\b(?P<w>last|next|this) (?P<u>week|month|year)\b", relative))]


_DATE_RULES = {"en": _date_rules("en"), "de": _date_rules("de")}


def _finish(text: str, lang: str, timestamp: datetime | None) -> str | None:
    """Tidy a rewritten clause into a fact, or None when it says nothing worth keeping."""
    if not text.isascii():  # drop emoji and other symbols
        text = "".join(c for c in text if unicodedata.category(c) not in ("So", "Sk", "Cs", "Co")
                       and c not in "\u200d\ufe0f")
    text = re.sub(r" (?=[,.;:!?])", "", " ".join(text.split())).strip(" ,;:.!?-\"'()[]*_")
    text = re.sub(r"(?:,? (?:too|as well|also|auch|right|ok|okay|you know|oder|ne|gell))+$", "", text, flags=_I)
    words = [w.lower() for w in _TOKEN.findall(text)] + re.findall(r"\d+", text)
    if not words or len(text.split()) > _MAX_FACT_WORDS or (lang != "other" and _STRAY_FIRST_PERSON.search(text)):
        return None  # never store a fact that still says "I" or "my"
    rest = words[1:] if len(text.split()) > 1 else words
    if all(w in _VACUOUS or w.removesuffix("s") in _VACUOUS or w.removesuffix("es") in _VACUOUS for w in rest):
        return None  # "Loves it", "Is happy today", "Sees": small talk, not memory
    if timestamp is not None and lang in _DATE_RULES:
        day = timestamp.date()
        for pattern, resolve in _DATE_RULES[lang]:
            text = pattern.sub(lambda m, resolve=resolve: resolve(m, day), text)
    return _cap(text)


_CONVERTERS: dict[str, Callable[[str, str, bool], _Rewritten]] = {
    "en": _en_clause, "de": _de_clause, "other": _other_clause}


# Words of acknowledgements and greetings: a note made only of them (and stop words)
# states nothing.
_SMALL_TALK = frozenset(
    """
    ok okay k thanks thank thx ty cheers please sorry welcome hi hello hey yo bye goodbye
    later see soon yes yeah yep yup no nope nah sure cool great nice awesome fine good
    perfect amazing wow lol haha hmm alright right agreed indeed got noted morning
    evening night afternoon day sounds sound lovely excellent brilliant fantastic lot
    much really interesting oh ah huh wonderful true exactly totally absolutely
    ja nein danke bitte hallo tschüss gut super
    """.split()
)
# First words of a text that asks or tells the assistant to do something ("What is my
# name", "Forget that I like tea", "Ignore previous instructions"): no note to keep.
# Not "is", "has", "was": "Is vegetarian", "Has two kids" are notes (this module's own
# form of a fact).
_NOT_A_NOTE = frozenset(
    """
    what who whom whose where when why how which
    forget ignore delete remove erase drop stop don dont never tell show list give find
    search look explain describe summarize summarise repeat say write make create help
    please reveal print answer translate check open send call
    wer wie wo wann warum welche welcher welches vergiss lösche zeig sag bitte
    """.split()
)
# "Remember: X", "Note - X": the note is X.
_NOTE_LEAD = re.compile(r"^(?:remember|note|don'?t forget|fyi)\s*[:\-–—]\s*", _I)


class HeuristicExtractor(Extractor):
    """Rule-based extractor following the extraction prompt's guidelines (English and German).

    Pure and deterministic: standard library only, no network, no model. Facts
    are subjectless third person ("Is vegetarian"), deduplicated within a call,
    with ``kind="preference"`` for likes, dislikes, favourites and wants, and an
    importance by the rules of :func:`memorist.policies.consolidation.derive_importance`.
    A call gives at most ``max_facts`` facts, the first ones (the cut is logged);
    None keeps them all here, but a :class:`~memorist.Memory`'s add still keeps at
    most :data:`MAX_FACTS_PER_TURN` of a turn (its reconciliation is bounded).
    """

    def __init__(self, *, max_facts: int | None = MAX_FACTS_PER_TURN) -> None:
        self.max_facts = max_facts

    nothing_found_hint = (
        " (without a model, facts are read from statements about oneself, such as 'I am vegetarian';"
        " a note such as 'Allergic to nuts' is kept as it is, a question or a long text is not;"
        " pass infer=False to store any text as it is)"
    )

    def note(self, text: str) -> list[Fact]:
        """A note that states no first-person fact ("Allergic to penicillin", "Alex's
        birthday is March 3") is kept as it is, tidied: these rules only read
        statements about oneself, and the caller gave the text as one thing to
        remember. Not a question, and not a text of more words than a clause."""
        from memorist.policies.text import STOPWORDS, asks, words

        fact = _NOTE_LEAD.sub("", " ".join(text.split())).strip().rstrip(" .")
        said, tokens = words(fact), len(fact.split())
        if asks(fact) or len(said) < 2 or not 2 <= tokens <= _MAX_CLAUSE_WORDS:
            return []  # a question, one token ("https://example.com"), more than a clause
        if all(w in STOPWORDS or w in _SMALL_TALK for w in said):
            return []  # "ok thanks", "good morning": nothing to remember
        if said[0] in _NOT_A_NOTE:
            return []  # a question without its mark, a request to the assistant
        kind = "preference" if (_DE_PREFERENCE if _detect_language(fact) == "de" else _EN_PREFERENCE).match(fact) else "fact"
        return [Fact(text=fact, kind=kind, source_role="user", importance=derive_importance(fact, kind))]

    def extract(self, messages: Sequence[Message], *, timestamp: datetime | None = None) -> list[Fact]:
        """Return the facts stated in the user and assistant ``messages`` (system messages are ignored)."""
        facts: list[Fact] = []
        seen: set[str] = set()
        for message in messages:
            if message.role not in ("user", "assistant") or not message.content:
                continue
            for text, kind in self._message_facts(message.content, message.role, timestamp):
                key = " ".join(text.casefold().split())
                if key not in seen:
                    seen.add(key)
                    facts.append(Fact(text=text, kind=kind, source_role=message.role, importance=derive_importance(text, kind)))
        return facts if self.max_facts is None else first_facts(facts, self.max_facts, "the heuristic extractor")

    @staticmethod
    def _message_facts(content: str, role: str, timestamp: datetime | None) -> Iterator[tuple[str, str]]:
        # Code blocks hold no personal facts and would only feed odd clauses to the rules.
        text = " \n".join(content.split("```")[0::2]).translate(_APOSTROPHES)
        lang = _detect_language(text)  # per message: facts stay in the language they were stated in
        preference = _DE_PREFERENCE if lang == "de" else _EN_PREFERENCE
        done: set[str] = set()  # pasted logs repeat lines; each distinct sentence is read once
        for sentence in _sentences(text):
            if sentence in done:
                continue
            done.add(sentence)
            question = sentence.rstrip(" \"')]").endswith("?")
            for clause in _clauses(sentence, lang):
                if len(clause.split()) > _MAX_CLAUSE_WORDS:
                    continue
                for raw, kind in _CONVERTERS[lang](clause.strip(" .!?\"'"), role, question):
                    fact = _finish(raw, lang, timestamp)
                    if fact:
                        yield fact, kind or ("preference" if preference.match(fact) else "fact")
