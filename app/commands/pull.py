"""`ember pull REF`: download a model from the Hugging Face Hub (resumable, verified)."""

from __future__ import annotations

import argparse

NAME = "pull"
HELP = (
    "Download a model from the Hub: ORG/REPO, ORG/REPO:QUANT, ORG/REPO/FILE.gguf or a catalog name."
)
ORDER = 32
FIT_AUTO_CTX = 4096  # the fit estimate's context when the ctx setting is auto


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "ref", help="org/repo, org/repo:Q4_K_M, org/repo/file.gguf, or a catalog name"
    )
    parser.add_argument(
        "--offline", action="store_true", help="never touch the network (like HF_HUB_OFFLINE=1)"
    )
    parser.add_argument(
        "--list", action="store_true", help="show the choices and their fit, download nothing"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def _show_plan(plan: object) -> None:
    from ember.app.commands._model_format import human_bytes, print_table, say

    rows = []
    moe = plan.fit.experts is not None  # type: ignore[attr-defined]
    for choice in plan.choices:  # type: ignore[attr-defined]
        fit = plan.fit_of(choice)  # type: ignore[attr-defined]
        kv = human_bytes(fit.kv_bytes) if fit.kv_bytes is not None else "?"
        mark = "*" if choice.label == plan.choice.label else " "  # type: ignore[attr-defined]
        row = [f"{mark} {choice.label}", str(len(choice.files)), human_bytes(choice.size_bytes)]
        if moe:  # experts mmap'd: one token's working set; resident: every expert paged in
            working, resident = fit.ram_working_set_bytes, fit.ram_needed_bytes
            row.append(f"{human_bytes(working)} / {human_bytes(resident)}")
        rows.append(row + [kv, fit.ram_verdict, "ok" if fit.disk_ok else "too big"])
    ctx = plan.fit.ctx  # type: ignore[attr-defined]
    say(f"{plan.ref.repo_id} at {plan.commit[:12]}:")  # type: ignore[attr-defined]
    if moe:
        experts = plan.fit.experts  # type: ignore[attr-defined]
        tables = "" if experts.vocab else " (token tables not counted)"
        say(
            f"mixture of experts: {experts.used} of {experts.count} experts per token, "
            f"{experts.total_params / 1e9:.2f}B parameters, "
            f"{experts.active_params / 1e9:.2f}B active{tables}"
        )
    kv_cache = plan.fit.kv_cache  # type: ignore[attr-defined]
    head = ["CHOICE", "FILES", "SIZE"] + (["RAM MMAP/RESIDENT"] if moe else [])
    print_table(rows, head + [f"KV@{ctx} {kv_cache}", "RAM", "DISK"])


def run(args: argparse.Namespace) -> int:
    from ember.app.commands._model_format import human_bytes, print_json, say
    from ember.app.commands._progress import ProgressBar
    from ember.app.config import load_settings
    from ember.app.loading import open_registry
    from ember.models.hub.pull import Puller

    def note(text: str) -> None:
        say(text, err=True)

    settings = load_settings()
    puller = Puller(
        open_registry(),
        offline=args.offline,
        ctx=settings.ctx or FIT_AUTO_CTX,  # ctx auto: the estimate is made at FIT_AUTO_CTX
        kv_cache=settings.kv_cache,
        on_progress=ProgressBar(),
        on_note=note,
    )
    puller.downloader.on_wait = lambda f: note(f"{f.name}: another pull is downloading it; waiting")
    from ember.models.registry.starter import STARTER_NAME

    plan = None
    if not puller.offline and args.ref != STARTER_NAME:
        plan = puller.plan(args.ref)
        if not args.json:
            _show_plan(plan)
        if args.list:
            return 0
        if plan.fit.ram_verdict == "too big":
            note(
                f"warning: {plan.choice.label} needs about {human_bytes(plan.fit.ram_needed_bytes)} of RAM"
            )
    try:
        result = puller.pull(args.ref, plan)
    except KeyboardInterrupt:
        note("interrupted: the partial download is kept; rerun the same `ember pull` to resume")
        return 130
    record = result.record
    if args.json:
        print_json(
            record.to_dict()
            | {"downloaded_bytes": result.downloaded_bytes, "source": result.source}
        )
        return 0
    for text in result.notes:
        note(text)
    where = {
        "hub": "downloaded",
        "ember": "already downloaded",
        "hf-cache": "from the Hugging Face cache",
    }
    say(
        f"{record.name}: {where.get(result.source, result.source)}, {human_bytes(record.size_bytes)} at {record.path}"
    )
    return 0
