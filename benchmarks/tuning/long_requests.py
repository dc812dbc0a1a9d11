"""Long requests with the ask last: does search still find the skill, and which sentence rule keeps it?

An agent often sends a request as context first and the ask last ("We are four on the team. ... Set up
X."). Search embeds ``query_texts(query, QUERY_SENTENCES)``: the whole request and, when it has several,
its first 6 sentences of 3+ whitespace words (MiniLM embeds only those sentences and stands their mean in
for the whole; the e5 route embeds the whole, cut to 128 tokens, and the sentences within its budget).
Two suspected gaps: an ask past the first 6 sentences is in no vector, and a Japanese or Chinese request
never splits (the ideographic full stop and the full-width ! and ? end no sentence, and a sentence without spaces is not 3 words).

The set (dev data only): every positive request of the skills dev set (``queries.dev.jsonl``: 160 English,
44 in other languages, 12 of them Japanese or Chinese), with N neutral context sentences in the request's
language (a fixed list per language below: the user's team, timeline, office, nothing a skill does),
drawn without replacement by ``random.Random(f"{SEED}:{id}:{N}")``, put before the ask ("last") or after
it ("first"); N = 0 is the dev request itself. Each is searched through ``Catalog.search`` (hybrid,
default settings, ``minilm+e5``) over the 883 real skills; scored hit@1 / hit@5 (``no_match`` a miss).

Candidate rules, fixed before any number was seen (each replaces ``search.query_texts`` for the run):

- ``today``: the first 6 sentences of 3+ words (search's rule when this was measured);
- ``ends``: the first 3 and the last 3 of them when there are more than 6 (6 or fewer: as today); kept,
  now ``search.query_texts``;
- ``cjk``: today's, plus the ideographic full stop and the full-width ! and ? end a sentence with or
  without a space after them, and a sentence of at least 6 CJK characters (Han, kana) counts as 3 words;
- ``ends+cjk``: both.

Part ``changes`` (no model): how many whole dev requests change their ``query_texts`` under each rule, per
dev set (MetaTool, Seal-Tools and Gorilla ``qrels.dev.tsv`` queries, the skills dev set, the multilingual
dev set): a request whose texts do not change gets the same answer, so zero means no dev number can move.

Part ``sealtools``: the Seal-Tools dev requests a rule changes, hybrid nDCG@10 (MiniLM, as ``bench lodo``)
under ``today`` and under it, and the whole set's change.

Part ``multilingual``: the multilingual dev set's requests a CJK rule changes, their wanted skill's rank
under ``ends`` and under it (``benchmarks/multilingual.py devset``'s catalog).

Usage: ``PYTHONPATH=. HF_HUB_OFFLINE=1 python benchmarks/tuning/long_requests.py [--data-root ../shared/data]
[--cache-dir benchmarks/.cache] [--rules today,ends] [--n 0,4,8,16]
[--part search|changes|sealtools|multilingual|both]``.
Not collected by pytest. Results: ``benchmarks/tuning/long_requests.md``.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from skillsearch.bench.beir import load_beir
from skillsearch.bench.cache import BenchEncoder
from skillsearch.bench.skills import load_queries, open_skills_catalog, skills_index_dir
from skillsearch.core.domain import Principal
from skillsearch.retrieval import search as search_module
from skillsearch.retrieval.encoders import make_encoder
from skillsearch.retrieval.search import QUERY_SENTENCES
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.retrieval.text_terms import fold

ROOT = Path(__file__).resolve().parents[2]
SEED = 20261207
CJK_JOINED = ("ja", "zh")  # languages whose sentences are written without a space between them

# Neutral context: who, when, where; no tool, no file format, no task a skill does.
CONTEXT: dict[str, list[str]] = {
    "en": [
        "I have been working on this for a couple of weeks now.",
        "My manager asked me to look into it before the end of the month.",
        "There are four of us on the team, and two joined recently.",
        "We are spread over different time zones, so replies can be slow.",
        "I am writing this from home because the office is closed today.",
        "Last week we spent most of our time on something unrelated.",
        "The people involved have agreed that it is worth doing.",
        "Nobody on the team has done this kind of thing before.",
        "I would like to finish it before my holiday starts on Friday.",
        "A colleague tried something similar last year but has since left the company.",
        "Most of us start early in the morning and finish around five.",
        "I am fairly new here and still learning how things are done.",
        "My laptop is a few years old but it works fine.",
        "The client is friendly and patient with us.",
        "We have had a busy month with several people out sick.",
        "I took over this work from someone who moved to another team.",
        "Our office is small and quite noisy in the afternoons.",
        "I prefer clear steps over long explanations.",
        "It is not urgent, but it has been on my list for a while.",
        "Thanks in advance for your patience with me.",
    ],
    "fr": [
        "J'y travaille depuis deux semaines environ.",
        "Mon responsable m'a demandé de m'en occuper avant la fin du mois.",
        "Nous sommes quatre dans l'équipe, dont deux arrivés récemment.",
        "Nous sommes dans des fuseaux horaires différents, donc les réponses sont parfois lentes.",
        "Je travaille depuis chez moi aujourd'hui parce que le bureau est fermé.",
        "La semaine dernière, nous étions occupés par tout autre chose.",
        "Personne dans l'équipe n'a jamais fait ce genre de chose.",
        "J'aimerais terminer avant le début de mes vacances vendredi.",
        "Un collègue avait essayé quelque chose de semblable l'an dernier, mais il est parti.",
        "La plupart d'entre nous commencent tôt et finissent vers dix-sept heures.",
        "Je suis assez nouveau ici et j'apprends encore comment les choses se passent.",
        "Mon ordinateur a quelques années mais il fonctionne bien.",
        "Le client est aimable et patient avec nous.",
        "Nous avons eu un mois chargé avec plusieurs personnes malades.",
        "J'ai repris ce travail d'une personne qui a changé d'équipe.",
        "Notre bureau est petit et assez bruyant l'après-midi.",
        "Je préfère des étapes claires plutôt que de longues explications.",
        "Ce n'est pas urgent, mais c'est sur ma liste depuis un moment.",
    ],
    "de": [
        "Ich arbeite seit ungefähr zwei Wochen daran.",
        "Meine Chefin hat mich gebeten, mich vor Monatsende darum zu kümmern.",
        "Wir sind zu viert im Team, zwei davon sind erst kürzlich dazugekommen.",
        "Wir arbeiten in verschiedenen Zeitzonen, deshalb dauern Antworten manchmal länger.",
        "Ich arbeite heute von zu Hause, weil das Büro geschlossen ist.",
        "Letzte Woche waren wir mit etwas ganz anderem beschäftigt.",
        "Niemand im Team hat so etwas schon einmal gemacht.",
        "Ich würde gern fertig werden, bevor am Freitag mein Urlaub beginnt.",
        "Ein Kollege hat letztes Jahr etwas Ähnliches versucht, ist aber inzwischen weg.",
        "Die meisten von uns fangen früh an und hören gegen fünf auf.",
        "Ich bin noch ziemlich neu hier und lerne noch, wie die Dinge laufen.",
        "Mein Rechner ist ein paar Jahre alt, funktioniert aber gut.",
        "Der Kunde ist freundlich und geduldig mit uns.",
        "Wir hatten einen anstrengenden Monat, mehrere Leute waren krank.",
        "Ich habe diese Arbeit von jemandem übernommen, der in ein anderes Team gewechselt ist.",
        "Unser Büro ist klein und nachmittags ziemlich laut.",
        "Mir sind klare Schritte lieber als lange Erklärungen.",
        "Es ist nicht dringend, steht aber schon eine Weile auf meiner Liste.",
    ],
    "es": [
        "Llevo unas dos semanas trabajando en esto.",
        "Mi jefa me pidió que me encargara antes de fin de mes.",
        "Somos cuatro en el equipo y dos llegaron hace poco.",
        "Trabajamos en husos horarios distintos, así que a veces las respuestas tardan.",
        "Hoy trabajo desde casa porque la oficina está cerrada.",
        "La semana pasada estuvimos ocupados con otra cosa muy distinta.",
        "Nadie del equipo ha hecho algo así antes.",
        "Me gustaría terminar antes de que empiecen mis vacaciones el viernes.",
        "Un compañero intentó algo parecido el año pasado, pero ya no está en la empresa.",
        "Casi todos empezamos temprano y terminamos hacia las cinco.",
        "Soy bastante nuevo aquí y todavía estoy aprendiendo cómo se hacen las cosas.",
        "Mi ordenador tiene unos años, pero funciona bien.",
        "El cliente es amable y tiene paciencia con nosotros.",
        "Hemos tenido un mes complicado con varias personas enfermas.",
        "Heredé este trabajo de alguien que se cambió a otro equipo.",
        "Nuestra oficina es pequeña y bastante ruidosa por las tardes.",
        "Prefiero pasos claros a explicaciones largas.",
        "No es urgente, pero lo tengo pendiente desde hace tiempo.",
    ],
    "pt": [
        "Estou trabalhando nisso há umas duas semanas.",
        "Minha gerente pediu que eu cuidasse disso antes do fim do mês.",
        "Somos quatro na equipe, e dois chegaram há pouco tempo.",
        "Trabalhamos em fusos horários diferentes, então às vezes as respostas demoram.",
        "Hoje estou trabalhando de casa porque o escritório está fechado.",
        "Na semana passada estávamos ocupados com outra coisa bem diferente.",
        "Ninguém da equipe fez algo assim antes.",
        "Gostaria de terminar antes de as minhas férias começarem na sexta-feira.",
        "Um colega tentou algo parecido no ano passado, mas já saiu da empresa.",
        "Quase todos nós começamos cedo e terminamos por volta das cinco.",
        "Sou relativamente novo aqui e ainda estou aprendendo como as coisas funcionam.",
        "Meu computador tem alguns anos, mas funciona bem.",
        "O cliente é simpático e paciente conosco.",
        "Tivemos um mês corrido, com várias pessoas doentes.",
        "Herdei este trabalho de alguém que mudou de equipe.",
        "Nosso escritório é pequeno e bastante barulhento à tarde.",
        "Prefiro passos claros a explicações longas.",
        "Não é urgente, mas está na minha lista há algum tempo.",
    ],
    "ja": [
        "この作業を始めてから二週間ほど経ちました。",
        "上司から月末までに対応するように頼まれています。",
        "チームは四人で、そのうち二人は最近入ったばかりです。",
        "メンバーの時差があるので、返事が遅くなることがあります。",
        "今日はオフィスが閉まっているので自宅から作業しています。",
        "先週はまったく別のことで忙しかったです。",
        "チームの誰もこういうことをやったことがありません。",
        "金曜日から休暇なので、その前に終わらせたいです。",
        "去年同僚が似たようなことを試しましたが、もう会社を辞めています。",
        "ほとんどのメンバーは朝早く始めて夕方五時ごろに終わります。",
        "私はまだここに来て日が浅く、仕事の進め方を覚えているところです。",
        "私のパソコンは数年前のものですが、問題なく動きます。",
        "お客様は親切で、私たちに対して辛抱強いです。",
        "今月は体調を崩した人が何人もいて忙しかったです。",
        "別のチームに移った人からこの仕事を引き継ぎました。",
        "私たちのオフィスは狭くて、午後はかなり騒がしいです。",
        "長い説明よりも分かりやすい手順のほうが好きです。",
        "急ぎではありませんが、しばらく前から気になっていました。",
    ],
    "zh": [
        "这件事我已经做了大概两个星期了。",
        "领导让我在月底之前处理好。",
        "我们团队一共四个人，其中两个是最近才加入的。",
        "我们分布在不同的时区，所以有时候回复比较慢。",
        "今天办公室关门，我在家里工作。",
        "上周我们一直在忙别的事情。",
        "团队里没有人做过这种事情。",
        "我周五开始休假，希望在那之前完成。",
        "去年有个同事试过类似的做法，不过他已经离职了。",
        "我们大多数人早上很早开始，下午五点左右下班。",
        "我来这里时间不长，还在熟悉工作方式。",
        "我的电脑用了好几年了，但还挺好用的。",
        "客户人很好，对我们也很有耐心。",
        "这个月很忙，好几个人都生病了。",
        "这项工作是我从调到别的团队的同事那里接手的。",
        "我们的办公室很小，下午特别吵。",
        "比起长篇解释，我更喜欢清楚的步骤。",
        "这事不急，但我一直想把它做完。",
    ],
    "ko": [
        "이 일을 시작한 지 2주쯤 됐어요.",
        "팀장님이 월말 전까지 처리해 달라고 하셨어요.",
        "우리 팀은 네 명이고, 그중 두 명은 최근에 합류했어요.",
        "팀원들이 서로 다른 시간대에 있어서 답장이 늦을 때가 있어요.",
        "오늘은 사무실이 문을 닫아서 집에서 일하고 있어요.",
        "지난주에는 전혀 다른 일로 바빴어요.",
        "팀원 중에 이런 일을 해 본 사람이 아무도 없어요.",
        "금요일부터 휴가라서 그 전에 끝내고 싶어요.",
        "작년에 동료가 비슷한 걸 시도했는데, 지금은 회사를 떠났어요.",
        "우리는 대부분 아침 일찍 시작해서 다섯 시쯤 퇴근해요.",
        "저는 여기 온 지 얼마 안 돼서 아직 일하는 방식을 배우고 있어요.",
        "제 노트북은 몇 년 됐지만 잘 작동해요.",
        "고객은 친절하고 우리에게 인내심이 많아요.",
        "이번 달에는 아픈 사람이 여러 명이라 바빴어요.",
        "다른 팀으로 옮긴 분에게서 이 일을 넘겨받았어요.",
        "우리 사무실은 작고 오후에는 꽤 시끄러워요.",
        "긴 설명보다는 명확한 단계가 더 좋아요.",
        "급하지는 않지만 한동안 마음에 걸려 있었어요.",
    ],
}


def long_request(qid: str, ask: str, lang: str, n: int, order: str) -> str:
    """``ask`` with ``n`` context sentences of its language before it (``order="last"``) or after it."""
    if n == 0:
        return ask
    context = random.Random(f"{SEED}:{qid}:{n}").sample(CONTEXT[lang], n)
    joined = lang in CJK_JOINED
    ask = ask.strip()
    if order == "first" and not ask.endswith((".", "!", "?", "。", "！", "？")):
        ask += "。" if joined else "."
    parts = [*context, ask] if order == "last" else [ask, *context]
    return ("" if joined else " ").join(parts)


# --- the candidate rules (each has search.query_texts' signature) ---------------------------------------

_END = re.compile(r"(?<=[.!?])\s+")
_END_CJK = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])\s*")
_CJK_CHAR = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def _sentences(query: str, cjk: bool) -> list[str]:
    if not cjk:
        return [p for p in _END.split(query.strip()) if len(p.split()) >= 3]
    parts = (p.strip() for p in _END_CJK.split(query.strip()))
    return [p for p in parts if len(p.split()) >= 3 or len(_CJK_CHAR.findall(p)) >= 6]


def _rule(ends: bool, cjk: bool) -> Callable[[str, int], list[str]]:
    def texts(query: str, max_sentences: int) -> list[str]:
        if max_sentences <= 0:
            return [query]
        parts = _sentences(query, cjk)
        if len(parts) <= 1:
            return [query]
        if ends and len(parts) > max_sentences:
            head = max_sentences // 2
            return [query, *parts[:head], *parts[len(parts) - (max_sentences - head):]]
        return [query, *parts[:max_sentences]]
    return texts


RULES: dict[str, Callable[[str, int], list[str]]] = {
    "today": _rule(ends=False, cjk=False),  # the rule before this measurement: the first 6
    "ends": _rule(ends=True, cjk=False),
    "cjk": _rule(ends=False, cjk=True),
    "ends+cjk": _rule(ends=True, cjk=True),
}


# --- part "search" -------------------------------------------------------------------------------------

def part_search(data_root: Path, cache_dir: Path, rules: list[str], ns: list[int]) -> list[dict[str, object]]:
    dataset = data_root / "skills-catalog"
    queries = [q for q in load_queries(dataset / "queries.dev.jsonl") if q.want]
    encoder = BenchEncoder(make_encoder("minilm+e5"), cache_dir)
    data_dir = skills_index_dir(cache_dir, encoder.name, dataset)
    t = time.perf_counter()
    # No result cache: the same request text is asked again under each rule.
    catalog, invalid = open_skills_catalog(dataset, encoder, data_dir, {"encoder": "minilm+e5", "result_cache_size": 0})
    print(f"catalog: {catalog.store.count()} skills ({invalid} invalid) in {time.perf_counter() - t:.0f}s",
          file=sys.stderr)
    conditions = [(0, "-")] + [(n, order) for order in ("last", "first") for n in ns if n]
    operator = Principal.operator()
    rows: list[dict[str, object]] = []
    original = search_module.query_texts
    # A request whose texts under a rule are those of a rule already run gets the same answer (search is
    # deterministic and reads nothing else the rule changes): it is looked up, not searched again.
    answers: dict[tuple[str, tuple[str, ...]], tuple[int | None, bool]] = {}
    try:
        for rule in rules:
            search_module.query_texts = RULES[rule]  # what candidates_stage calls
            for n, order in conditions:
                t = time.perf_counter()
                ranks: dict[str, list[int | None]] = {"en": [], "other": [], "ja+zh": []}
                abstained = {"en": 0, "other": 0, "ja+zh": 0}
                for q in queries:
                    text = long_request(q.qid, q.text, q.lang, n, order)
                    text = text[: catalog.settings.max_query_chars]
                    key = (text, tuple(RULES[rule](fold(text), QUERY_SENTENCES)))
                    if key not in answers:
                        result = catalog.search(operator, SearchRequest(text, limit=10))
                        slugs = [] if result.no_match else [h.skill.slug for h in result.hits]
                        answers[key] = (next((i for i, s in enumerate(slugs, start=1) if s in q.want), None),
                                        result.no_match)
                    rank, no_match = answers[key]
                    for group in ("en" if q.lang == "en" else "other", "ja+zh" if q.lang in CJK_JOINED else ""):
                        if group:
                            ranks[group].append(rank)
                            abstained[group] += no_match
                row: dict[str, object] = {"rule": rule, "n": n, "ask": order}
                for group, rs in ranks.items():
                    row[f"{group} n"] = len(rs)
                    row[f"{group} hit@1"] = round(sum(r == 1 for r in rs) / len(rs), 4)
                    row[f"{group} hit@5"] = round(sum(r is not None and r <= 5 for r in rs) / len(rs), 4)
                    row[f"{group} no_match"] = abstained[group]
                rows.append(row)
                print(json.dumps(row), f"({time.perf_counter() - t:.0f}s)", file=sys.stderr, flush=True)
    finally:
        search_module.query_texts = original
        catalog.close()
    return rows


# --- part "changes" ------------------------------------------------------------------------------------

def dev_requests(data_root: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name in ("metatool", "sealtools", "gorilla"):
        ds = load_beir(data_root / name, "dev")
        out[name] = [ds.queries[q] for q in sorted(ds.qrels) if q in ds.queries]
    skills = [json.loads(line) for line in (data_root / "skills-catalog" / "queries.dev.jsonl").read_text(
        encoding="utf-8").splitlines() if line.strip()]
    out["skills (en)"] = [r["q"] for r in skills if r.get("lang", "en") == "en"]
    out["skills (other)"] = [r["q"] for r in skills if r.get("lang", "en") != "en"]
    multi = [json.loads(line) for line in (ROOT / "benchmarks" / "data" / "multilingual.jsonl").read_text(
        encoding="utf-8").splitlines() if line.strip()]
    out["multilingual (ja+zh)"] = [r["query"] for r in multi if r["lang"] in CJK_JOINED]
    out["multilingual (other)"] = [r["query"] for r in multi if r["lang"] not in CJK_JOINED]
    return out


def part_changes(data_root: Path, rules: list[str]) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = {}
    for name, texts in dev_requests(data_root).items():
        row = {"requests": len(texts)}
        for rule in rules:
            if rule != "today":
                row[rule] = sum(RULES[rule](fold(t), 6) != RULES["today"](fold(t), 6) for t in texts)
        table[name] = row
    return table


# --- part "sealtools" ----------------------------------------------------------------------------------

def part_sealtools(data_root: Path, cache_dir: Path, rules: list[str]) -> list[dict[str, object]]:
    """Hybrid nDCG@10 (MiniLM, as ``bench lodo``) of the Seal-Tools dev requests a rule changes, under today's
    rule and under it; the whole set's change is the subset's times its share (the others are untouched)."""
    from skillsearch.bench.dev import DevSplit, dev_split, score_requests

    rows: list[dict[str, object]] = []
    original = search_module.query_texts
    with dev_split("sealtools", data_root, cache_dir=cache_dir) as split:
        try:
            for rule in (r for r in rules if r != "today"):
                changed = [q for q, t in split.texts.items()
                           if RULES[rule](fold(t), 6) != RULES["today"](fold(t), 6)]
                if not changed:
                    rows.append({"rule": rule, "changed": 0, "of": len(split.texts)})
                    continue
                sub = DevSplit(split.name, split.catalog, split.id_map, {q: split.texts[q] for q in changed},
                               {q: split.qrels[q] for q in changed})
                scores = {}
                for name in ("today", rule):
                    search_module.query_texts = RULES[name]
                    scores[name] = score_requests(sub, lambda t: SearchRequest(t, limit=10))["ndcg@10"]
                delta = (scores[rule] - scores["today"]) * len(changed) / len(split.texts)
                rows.append({"rule": rule, "changed": len(changed), "of": len(split.texts),
                             "ndcg@10 today": round(scores["today"], 4), f"ndcg@10 {rule}": round(scores[rule], 4),
                             "whole set change": round(delta, 4)})
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        finally:
            search_module.query_texts = original
    return rows


# --- part "multilingual" -------------------------------------------------------------------------------

def part_multilingual(data_root: Path, cache_dir: Path, rules: list[str]) -> list[dict[str, object]]:
    """The multilingual dev set's requests (``benchmarks/data/multilingual.jsonl``) whose texts a rule
    changes against ``ends``, searched under both over its catalog (the sample and the 883 skills,
    ``minilm+e5``, as ``benchmarks/multilingual.py devset``): the wanted skill's rank under each."""
    from skillsearch.bench.multilingual import OPERATOR, Options, devset_catalog

    devset = ROOT / "benchmarks" / "data" / "multilingual.jsonl"
    items = [json.loads(line) for line in devset.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows: list[dict[str, object]] = []
    original = search_module.query_texts
    options = Options(devset=devset, data_root=data_root, cache_dir=cache_dir, encoders=["minilm+e5"])
    with devset_catalog(options, "minilm+e5", "both") as (catalog, _):
        try:
            for rule in (r for r in rules if r not in ("today", "ends")):
                for item in items:
                    q = fold(item["query"])
                    if RULES[rule](q, 6) == RULES["ends"](q, 6):
                        continue
                    row: dict[str, object] = {"rule": rule, "id": item["id"]}
                    # The catalog's result cache keys on the request: each rule asks for another limit.
                    for limit, name in ((10, "ends"), (9, rule)):
                        search_module.query_texts = RULES[name]
                        hits = catalog.search(OPERATOR, SearchRequest(item["query"], limit=limit)).hits
                        ranked = [(h.skill.slug, "sample" if h.skill.source.startswith("sample-") else "skills-catalog")
                                  for h in hits]
                        want = {(slug, item["corpus"]) for slug in item["expected"]}
                        row[f"rank {name}"] = next((i for i, r in enumerate(ranked, start=1) if r in want), None)
                    rows.append(row)
        finally:
            search_module.query_texts = original
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--cache-dir", type=Path, default=ROOT / "benchmarks" / ".cache")
    ap.add_argument("--rules", default=",".join(RULES))
    ap.add_argument("--n", default="0,4,8,16")
    ap.add_argument("--part", choices=("search", "changes", "sealtools", "multilingual", "both"), default="both")
    args = ap.parse_args()
    rules = args.rules.split(",")
    if args.part in ("changes", "both"):
        print("dev requests whose query_texts change (of all dev requests of each set):")
        for name, row in part_changes(args.data_root, rules).items():
            print(f"  {name}: " + ", ".join(f"{k} {v}" for k, v in row.items()))
    if args.part == "multilingual":
        for row in part_multilingual(args.data_root, args.cache_dir, rules):
            print(row)
    if args.part == "sealtools":
        for row in part_sealtools(args.data_root, args.cache_dir, rules):
            print(row)
    if args.part in ("search", "both"):
        with tempfile.TemporaryDirectory():
            rows = part_search(args.data_root, args.cache_dir, rules, [int(n) for n in args.n.split(",")])
        groups = ("en", "other", "ja+zh")
        print("| rule | N | ask | " + " | ".join(f"{g} hit@1 | {g} hit@5 | {g} no_match" for g in groups) + " |")
        print("| --- | --- | --- | " + " | ".join("--- | --- | ---" for _ in groups) + " |")
        for r in rows:
            print(f"| {r['rule']} | {r['n']} | {r['ask']} | " + " | ".join(
                f"{r[f'{g} hit@1']:.3f} | {r[f'{g} hit@5']:.3f} | {r[f'{g} no_match']}" for g in groups) + " |")


if __name__ == "__main__":
    main()
