"""attn-study-report: tables whose numbers are known (hand-made run directories), the listing of
failed and missing runs, the output formats, and the real smoke sweep → report path."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from attn_study.families.jain_wallace.report import run_classes
from attn_study.io import write_json_atomic
from attn_study.report.cli import build_report
from attn_study.report.cli import main as report_main
from attn_study.report.render import latex_escape, markdown, mean_ci, seed_spread
from attn_study.report.runs import collect
from tests.helpers import REPO, cli_env, launch, launch_here
from tests.report.paper_runs import jw_instances


def make_run(
    root,
    name,
    *,
    dataset,
    encoder,
    attention="additive",
    model="flat",
    state="complete",
    seed=13,
    summary=None,
    instances=None,
    family="jain_wallace",
    finished=1.0e9,
    error=None,
    projection="softmax",
    lam=None,
    settings=None,
):
    run = root / name
    (run / ".hydra").mkdir(parents=True)
    config = OmegaConf.create(
        {
            k: {"name": v}
            for k, v in dict(
                dataset=dataset, model=model, encoder=encoder, attention=attention, projection=projection
            ).items()
        }
        | {"seed": seed, "analysis": {family: {}}}
    )
    if lam is not None:
        config.projection.lam = lam
    for key, value in (settings or {}).items():
        OmegaConf.update(config, key, value, force_add=True)
    OmegaConf.save(config, run / ".hydra" / "config.yaml")
    status = {"state": state, "finished": finished, "labels": ["neg", "pos"]}
    if error:
        status["error"] = error
    write_json_atomic(run / "status.json", status)
    if summary is not None:
        write_json_atomic(run / "summary.json", summary)
    if instances is not None:
        (run / "analysis" / family).mkdir(parents=True)
        instances.to_parquet(run / "analysis" / family / "instances.parquet")
    return run


def jw_summary(base: float, acc: float) -> dict:
    """``jw/...`` keys with values that encode (statistic, class): base + class/10 + offsets."""
    out = {"test/acc": acc, "test/f1": acc, "test/auroc": acc, "val/acc_best": acc, "run/seconds": 60.0}
    for name, shift in (("tau_grad", 0.0), ("tau_loo", 0.05)):
        for k in (0, 1):
            out[f"jw/{name}/class_{k}/mean"] = base + k / 10 + shift
            out[f"jw/{name}/class_{k}/std"] = 0.2
            out[f"jw/{name}/class_{k}/sig_frac"] = 0.5 + k / 10
            out[f"jw/{name}/class_{k}/n"] = 10
        # over every instance ("all"): the classes' mean, a wider std
        out |= {f"jw/{name}/mean": base + 0.05 + shift, f"jw/{name}/std": 0.25, f"jw/{name}/sig_frac": 0.55}
        out[f"jw/{name}/n"] = 20
    return out


@pytest.fixture
def sweep(tmp_path):
    root = tmp_path / "sweep"
    for i, dataset in enumerate(("sst", "imdb")):
        make_run(
            root,
            f"{dataset}-lstm",
            dataset=dataset,
            encoder="lstm",
            summary=jw_summary(0.3 + i, 0.8),
            instances=jw_instances(i),
        )
        make_run(
            root,
            f"{dataset}-average",
            dataset=dataset,
            encoder="average",
            summary=jw_summary(0.6 + i, 0.7),
            instances=jw_instances(10 + i),
        )
    make_run(root, "sst-cnn", dataset="sst", encoder="cnn", state="failed", error="RuntimeError: out of memory")
    make_run(root, "sst-lstm-old", dataset="sst", encoder="lstm", summary=jw_summary(9.0, 0.1), finished=1.0)
    write_json_atomic(
        root / "sweep.json",
        {"jobs": {"sst-lstm": ["dataset=sst", "encoder=lstm"], "imdb-cnn": ["dataset=imdb", "encoder=cnn"]}},
    )
    return root


def test_table2_has_the_runs_numbers_per_dataset_and_class(sweep):
    out = build_report(sweep)
    table = pd.read_csv(out / "table2_additive-softmax.csv")
    assert list(zip(table["dataset"], table["class"])) == [
        ("imdb", "all"),
        ("imdb", "neg"),
        ("imdb", "pos"),
        ("sst", "all"),
        ("sst", "neg"),
        ("sst", "pos"),
    ]
    sst_all, sst_pos = table.iloc[3], table.iloc[5]
    assert sst_all["tau_g_bilstm_mean"] == pytest.approx(0.35) and sst_all["tau_loo_bilstm_mean"] == pytest.approx(0.4)
    assert sst_all["tau_g_bilstm_std"] == pytest.approx(0.25) and sst_all["tau_g_bilstm_n"] == 20
    assert sst_pos["tau_g_bilstm_mean"] == pytest.approx(0.4)  # 0.3 + class 1 / 10, the newer lstm run
    assert sst_pos["tau_g_average_mean"] == pytest.approx(0.7)
    assert sst_pos["tau_loo_bilstm_mean"] == pytest.approx(0.45)
    assert sst_pos["tau_loo_bilstm_sig_frac"] == pytest.approx(0.6)
    md = (out / "table2_additive-softmax.md").read_text()
    rows = [line for line in md.splitlines() if line.startswith("| sst") or line.startswith("| imdb")]
    assert len(rows) == 6
    # the significant fraction as a share of instances (60.0 %), never like a mean (0.60)
    pct = "60.0\u00a0%"
    # τ with 3 decimals, as every table prints a mean (render.format_number)
    assert f"| sst | pos | 0.400 ± 0.200 | {pct} | 10 | 0.700 ± 0.200 | {pct} | 10 | 0.450 ± 0.200 | {pct} | 10 |" in md
    header = md.splitlines()[2]
    assert all(h in header for h in ("τ_g BiLSTM", "τ_g Average", "τ_loo BiLSTM"))
    assert r"$\pm$" in (out / "table2_additive-softmax.tex").read_text()


def test_table2_rows_are_the_classes_predicted_or_labelled(tmp_path):
    """bAbI's output layer names 36 words, 6 of them answers: a class neither predicted nor the label of an
    analysed instance has no row; one that is a label but never predicted has a row with n = 0."""
    root = tmp_path / "sweep"
    summary = jw_summary(0.3, 0.8)  # predicted: classes 0 and 1
    labels = jw_instances(0, n=4).assign(label=[0, 2, 2, 0])  # predictions 0, 1, 0, 1
    for seed, name in ((13, "babi-lstm"), (14, "babi-lstm-14")):
        make_run(root, name, dataset="babi1", encoder="lstm", seed=seed, summary=summary, instances=labels)
        status = json.loads((root / name / "status.json").read_text())
        write_json_atomic(root / name / "status.json", status | {"labels": ["Daniel", "bathroom", "garden", "went"]})
    out = build_report(root)
    table = pd.read_csv(out / "table2_additive-softmax.csv")
    assert list(table["class"]) == ["all", "Daniel", "bathroom", "garden"] * 2
    assert list(table["tau_g_bilstm_n"]) == [20, 10, 10, 0] * 2
    # across seeds in the same order: all first, then the classes as numbered (not sorted by name)
    seeds = pd.read_csv(out / "table2_additive-softmax_seeds.csv")
    assert list(seeds["class"]) == ["all", "Daniel", "bathroom", "garden"]

    def babi_lstm():
        return next(r for r in collect(root)[0] if r.path.name == "babi-lstm")

    assert run_classes(babi_lstm(), "jw/tau_grad") == [0, 1, 2]
    (root / "babi-lstm" / "analysis" / "jain_wallace" / "instances.parquet").unlink()  # no table: every class named
    assert run_classes(babi_lstm(), "jw/tau_grad") == [0, 1, 2, 3]


def test_failed_missing_and_replaced_runs_are_listed(sweep):
    out = build_report(sweep)
    runs = pd.read_csv(out / "runs.csv")
    states = dict(zip(runs["run"], runs["state"]))
    assert states["sst-cnn"] == "failed" and states["imdb-cnn"] == "missing"
    page = (out / "index.html").read_text()
    assert "out of memory" in page and "imdb-cnn" in page and "sst-lstm-old" in page
    accuracy = pd.read_csv(out / "accuracy.csv")
    assert len(accuracy) == 4 and 0.1 not in accuracy["test/acc"].tolist()  # the replaced run is not used


def test_html_is_self_contained_with_the_figures(sweep):
    out = build_report(sweep)
    page = (out / "index.html").read_text()
    for name in ("fig3_additive-softmax.png", "fig4_additive-softmax.png", "fig5_additive-softmax.png"):
        assert (out / name).is_file()
    assert page.count('src="data:image/png;base64,') == 3
    assert not re.search(r'src="(?!data:)', page)


def test_serrano_smith_tables(tmp_path):
    root = tmp_path / "ss"
    summary = {
        "ss/n_instances": 10,
        "ss/single/n": 10,
        "ss/multi/n": 10,
        "test/acc": 0.5,
        "ss/multi/grad_vs_attn_ratio": 2.0,
    }
    for key in ("single", "single_grad", "single_grad_attention"):
        for cell, value in zip(("yes_yes", "yes_no", "no_yes", "no_no"), (10.0, 20.0, 30.0, 40.0)):
            summary[f"ss/{key}/flip_table/{cell}"] = value
    for ranking in ("attention", "random"):
        summary[f"ss/multi/{ranking}/never_flip"] = 1
        summary[f"ss/multi/{ranking}/never_flip_frac"] = 0.1
        summary[f"ss/multi/{ranking}/frac_removed/median"] = 0.25 if ranking == "attention" else 0.75
        summary[f"ss/multi/{ranking}/frac_removed/mean"] = 0.3
    frame = pd.DataFrame(
        {"length": [3] * 10, "attention_frac": np.linspace(0, 1, 10), "random_frac": np.linspace(0.5, 1, 10)}
    )
    make_run(
        root,
        "yelp-han-gru",
        dataset="yelp",
        model="han",
        encoder="gru",
        summary=summary,
        instances=frame,
        family="serrano_smith",
    )
    out = build_report(root)
    flips = pd.read_csv(out / "ss_flip_table.csv")
    assert len(flips) == 3 and flips.iloc[0]["only i* flips"] == 20.0 and flips.iloc[0]["i* by"] == "attention"
    multi = pd.read_csv(out / "ss_fraction_removed.csv")
    assert multi.set_index("ranking").loc["attention", "median frac removed"] == 0.25
    assert multi.set_index("ranking").loc["attention", "gradient sooner / attention sooner"] == 2.0
    assert (out / "ss_fraction_removed_yelp.png").is_file()


def test_sparsity_tables_have_the_runs_numbers(tmp_path):
    from scipy import stats

    root = tmp_path / "meister"
    grid = {
        ("lstm", "additive", "softmax", None): (0.90, 0.95),
        ("lstm", "additive", "sparsemax", None): (0.88, 0.80),
        ("lstm", "additive", "sparsegen", -1.0): (0.85, 0.85),
        ("lstm", "additive", "sparsegen", 0.5): (0.80, 0.70),
        ("transformer", "dot", "sparsegen", -1.0): (0.70, 0.9),
        ("transformer", "dot", "sparsegen", 0.5): (0.6, 0.8),
    }
    for i, ((encoder, attention, projection, lam), (hidden, g_input)) in enumerate(grid.items()):
        summary = {
            "sp/n_instances": 10,
            "sp/entropy/g_hidden/mean": hidden,
            "sp/entropy/g_hidden/std": 0.05,
            "sp/entropy/g_hidden/n": 10,
            "sp/entropy/g_input/mean": g_input,
            "sp/tau/attn_g_input/mean": 0.1 * i,
            "test/acc": 0.8,
        }
        if projection == "sparsemax":  # a run with the statistics over (instance, p) pairs too
            summary |= {"sp/entropy/g_hidden_pairs/mean": 0.87, "sp/entropy/g_hidden_pairs/std": 0.09}
        make_run(
            root,
            f"run{i}",
            dataset="sst",
            encoder=encoder,
            attention=attention,
            projection=projection,
            lam=lam,
            summary=summary,
            family="sparsity",
        )
    out = build_report(root)
    table1 = (out / "sp_table1.md").read_text()
    assert "| lstm + additive (softmax) | 0.900 ± 0.050 |" in table1
    assert "| lstm + additive (sparsegen λ=-1) | 0.850 ± 0.050 |" in table1
    assert "| lstm + additive (sparsemax) | 0.880 ± 0.050; over (instance, p): 0.870 ± 0.090 |" in table1
    table2 = pd.read_csv(out / "sp_table2.csv").set_index("model")
    tau = stats.kendalltau([0.0, -1.0, 0.5], [0.80, 0.85, 0.70])  # sparsemax counts as λ = 0
    assert table2.loc["lstm + additive", "τ-b run means"] == pytest.approx(tau.statistic)
    assert table2.loc["lstm + additive", "p run means"] == pytest.approx(tau.pvalue)
    assert table2.loc["lstm + additive", "runs"] == 3
    assert table2.loc["transformer + dot", "runs"] == 2 and np.isnan(table2.loc["transformer + dot", "τ-b run means"])
    assert (out / "sp_fig2_entropy_per_projection.png").is_file() and (out / "sp_fig3_tau_vs_lambda.png").is_file()


@pytest.mark.slow  # a paper's smoke sweep beside the Jain & Wallace one of the fast suite (issue 42 §5)
def test_smoke_meister_sweep_then_report(tmp_path):
    sweep = tmp_path / "smoke_meister"
    # one seed (8 jobs): Table 2 over several seeds is the hand-set test below
    run = launch(sweep, "sweep=smoke_meister", "seed=13", "logger=csv", timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "8 jobs: 8 ran" in run.stdout
    out = build_report(sweep)
    for name in (
        "sp_table1.md",
        "sp_table2.md",
        "sp_support.md",
        "sp_fig1_tau_input_vs_intermediate.png",
        "sp_fig2_entropy_per_projection.png",
        "sp_fig3_tau_vs_lambda.png",
    ):
        assert (out / name).is_file(), name
    table1 = pd.read_csv(out / "sp_table1.csv")
    assert len(table1) == 8 and set(table1["model"]) == {"lstm + additive", "transformer + dot"}
    table2 = pd.read_csv(out / "sp_table2.csv")
    assert list(table2["runs"]) == [3, 3] and list(table2["seeds"]) == [1, 1] and list(table2["λ values"]) == [3, 3]
    md = (out / "sp_table2.md").read_text()
    assert "Kendall τ-b" in md and "pooled" in md and "run means" in md and "p " in md
    support = pd.read_csv(out / "sp_support.csv")
    assert list(dict.fromkeys(support["projection"])) == ["softmax", "sparsegen λ=-1", "sparsemax", "sparsegen λ=0.5"]
    assert (support.loc[support["projection"] == "softmax", "mean"] == 1.0).all()  # softmax weighs every token


def test_meister_table2_is_kendall_tau_b_over_pooled_instances_and_over_run_means(tmp_path):
    """Three λ × two seeds with hand-set entropies: the pooled τ-b is scipy's over all 6 × 4 (λ, H̃) pairs, the
    run-level one scipy's over the 6 (λ, run mean) points; the support table averages over seeds."""
    root = tmp_path / "meister"
    rng = np.random.default_rng(0)
    points, pairs = [], ([], [])
    for lam_, projection in ((-1.0, "sparsegen"), (0.0, "sparsemax"), (0.5, "sparsegen")):
        for seed in (13, 14):
            values = np.clip(0.8 - 0.2 * lam_ + rng.normal(0, 0.1, 4), 0, 1)
            summary = {
                "sp/n_instances": 4,
                "sp/entropy/g_input/mean": float(values.mean()),
                "sp/support/frac/mean": 0.3 - 0.2 * lam_ + (seed - 13) * 0.02,
            }
            make_run(
                root,
                f"l{lam_}-s{seed}",
                dataset="sst",
                encoder="lstm",
                projection=projection,
                lam=lam_ if projection == "sparsegen" else None,
                seed=seed,
                summary=summary,
                family="sparsity",
                instances=pd.DataFrame({"entropy_g_input": values}),
            )
            points.append((lam_, values.mean()))
            pairs[0].extend([lam_] * 4)
            pairs[1].extend(values)
    out = build_report(root)
    table = pd.read_csv(out / "sp_table2.csv").iloc[0]
    from scipy import stats

    pooled = stats.kendalltau(*pairs)
    means = stats.kendalltau(*zip(*points))
    assert table["τ-b pooled (instances)"] == pytest.approx(pooled.statistic)
    assert table["p pooled"] == pytest.approx(pooled.pvalue)
    assert table["τ-b run means"] == pytest.approx(means.statistic)
    assert table["p run means"] == pytest.approx(means.pvalue)
    assert (table["pairs"], table["runs"], table["seeds"], table["λ values"]) == (24, 6, 2, 3)
    per_seed = [stats.kendalltau(*zip(*points[k::2])).statistic for k in (0, 1)]  # points alternate seeds 13, 14
    assert table["τ-b per seed, mean"] == pytest.approx(np.mean(per_seed))
    assert table["τ-b per seed, std"] == pytest.approx(np.std(per_seed, ddof=1)) and table["seeds with τ-b"] == 2
    card = pd.read_csv(out / "scorecard.csv")
    cell = card[(card["source"] == "Table 2") & (card["setting"] == "sst flat lstm additive sparsegen")].iloc[0]
    assert cell["ours"] == pytest.approx(np.mean(per_seed)) and cell["n seeds"] == 2 and cell["paper value"] == -0.866
    assert cell["verdict"].startswith("not comparable: no recipe")  # hand-made runs have no recipe
    support = pd.read_csv(out / "sp_support.csv").set_index("projection")
    assert support.loc["sparsemax", ["mean", "std", "n"]].tolist() == pytest.approx([0.31, 0.01, 2])
    assert str(support["n"].dtype) == "int64"  # a count, never 2.0
    assert "| sparsemax | 31.0\u00a0% ± 1.0\u00a0% (2) |" in (out / "sp_support.md").read_text()


def test_runs_that_differ_in_another_setting_are_their_own_rows(tmp_path):
    """Two BiLSTM runs that differ only in the learning rate are not one model: neither replaces the
    other, and the odd one out is labelled by the setting where it departs."""
    root = tmp_path / "lr"
    make_run(
        root,
        "lstm",
        dataset="sst",
        encoder="lstm",
        summary=jw_summary(0.3, 0.8),
        settings={"model.optimizer.lr": 0.001},
    )
    make_run(
        root,
        "lstm-again",
        dataset="sst",
        encoder="lstm",
        summary=jw_summary(0.35, 0.81),
        finished=1.1e9,
        settings={"model.optimizer.lr": 0.001},
    )  # the same experiment, later: replaces the first
    make_run(
        root,
        "lstm-fast",
        dataset="sst",
        encoder="lstm",
        summary=jw_summary(0.5, 0.7),
        settings={"model.optimizer.lr": 0.01},
    )
    make_run(
        root,
        "avg",
        dataset="sst",
        encoder="average",
        summary=jw_summary(0.6, 0.75),
        settings={"model.optimizer.lr": 0.001},
    )
    out = build_report(root)
    accuracy = pd.read_csv(out / "accuracy.csv").fillna("")
    assert sorted(zip(accuracy["encoder"], accuracy["variant"], accuracy["test/acc"])) == [
        ("average", "", 0.75),
        ("lstm", "", 0.81),
        ("lstm", "lr=0.01", 0.7),
    ]
    table = pd.read_csv(out / "table2_additive-softmax.csv").fillna("")
    rows = {(v, c): m for v, c, m in zip(table["variant"], table["class"], table["tau_g_bilstm_mean"])}
    assert rows[("", "neg")] == pytest.approx(0.35) and rows[("lr=0.01", "neg")] == pytest.approx(0.5)
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 4
    replaced = pd.read_csv(out / "replaced.csv")  # the one left out, named with the run kept and why
    assert replaced[["run left out", "replaced by", "why"]].values.tolist() == [
        ["lstm", "lstm-again", "same config, finished later"]
    ]
    assert "lstm-again" in (out / "index.html").read_text()


def test_an_unreadable_summary_or_sweep_record_is_listed_and_the_rest_reported(sweep):
    (sweep / "imdb-lstm" / "summary.json").write_text('{"test/acc": 0.')  # truncated
    (sweep / "sweep.json").write_text("not json")
    out = build_report(sweep)
    runs = pd.read_csv(out / "runs.csv")
    states = dict(zip(runs["run"], runs["state"]))
    assert states["imdb-lstm"] == "unreadable" and states["sweep.json"] == "unreadable"
    assert "summary.json is unreadable" in (out / "index.html").read_text()
    table = pd.read_csv(out / "table2_additive-softmax.csv")
    assert "sst" in set(table["dataset"])  # the other runs are still reported


def test_render_helpers():
    assert latex_escape("a_b & 50% τ ± #1") == r"a\_b \& 50\% $\tau$ $\pm$ \#1"
    assert (
        markdown(pd.DataFrame({"a": [1.0, float("nan")], "b": ["x|y", "z"]}))
        == "| a | b |\n|---|---|\n| 1.000 | x\\|y |\n| — | z |\n"
    )
    assert mean_ci(0.4123, 0.39, 0.43) == "0.412 [0.390, 0.430]" and mean_ci(0.5, np.nan, 1.0) == "0.500"
    assert mean_ci(float("nan"), 0, 1) == "—"


def test_seed_spread_is_an_exact_permutation_criterion():
    assert seed_spread([0.5, 0.6, 0.55], [0.2, 0.3, 0.25]) == "Δ +0.300, beyond seed spread (p = 0.10)"
    assert seed_spread([0.5, 0.2], [0.3, 0.4]).endswith("within seed spread")
    assert seed_spread([1.0, 2.0], [3.0, 4.0]) == "Δ -2.000, beyond seed spread (p = 0.33)"  # 2 / C(4, 2)
    assert seed_spread([0.5], [0.2, 0.3]) == "—" and seed_spread([0.5, np.nan], [0.2, 0.3]) == "—"


def test_report_cli_errors_in_one_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "attn_study.report.cli", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=cli_env(),
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "is not a directory" in proc.stderr


def test_smoke_sweep_then_report(tmp_path, monkeypatch, capsys):
    """The documented path: ``attn-study -m sweep=smoke`` then ``attn-study-report`` on its directory (both entry
    points in this process: each is run in a fresh one in tests/test_run.py and above)."""
    sweep = tmp_path / "smoke"
    code, stdout, stderr = launch_here(sweep, "sweep=smoke", "logger=csv", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0, stderr[-3000:]
    assert "6 jobs: 6 ran" in stdout
    report_main([str(sweep)])
    md = (sweep / "report" / "table2_additive-softmax.md").read_text()
    rows = [line for line in md.splitlines() if line.startswith("| synthetic |")]
    assert len(rows) == 3  # synthetic × {all, negative, positive}
    assert [r.split(" | ")[1] for r in rows] == ["all", "negative", "positive"]
    for r in rows:
        assert len(r.strip("|").split("|")) == 11  # dataset, class, 3 × (mean ± std, sig. frac., n)
    table = pd.read_csv(sweep / "report" / "table2_additive-softmax.csv")
    summaries = [
        json.loads((d / "summary.json").read_text())
        for d in sweep.iterdir()
        if (d / "summary.json").is_file() and "encoder=average" in d.name and "attention=additive" in d.name
    ]
    for cls, key in (("positive", "jw/tau_grad/class_1/mean"), ("all", "jw/tau_grad/mean")):
        got = table.loc[table["class"] == cls, "tau_g_average_mean"].dropna().tolist()
        assert got and got[0] in {s[key] for s in summaries}
    assert (sweep / "report" / "index.html").is_file() and (sweep / "report" / "accuracy.md").is_file()


def test_several_seeds_give_rows_per_seed_and_a_spread_over_seeds(tmp_path):
    root = tmp_path / "seeds"
    for seed, base in ((1, 0.2), (2, 0.4)):
        make_run(root, f"lstm-{seed}", dataset="sst", encoder="lstm", seed=seed, summary=jw_summary(base, 0.8))
        make_run(root, f"avg-{seed}", dataset="sst", encoder="average", seed=seed, summary=jw_summary(base + 0.3, 0.7))
    out = build_report(root)
    per_seed = pd.read_csv(out / "table2_additive-softmax.csv")
    assert list(per_seed["seed"]) == [1, 1, 1, 2, 2, 2]
    assert list(per_seed["class"]) == ["all", "neg", "pos"] * 2
    seeds = pd.read_csv(out / "table2_additive-softmax_seeds.csv").set_index("class")
    assert seeds.loc["neg", "τ_g BiLSTM mean over seeds"] == pytest.approx(0.3)
    assert seeds.loc["neg", "τ_g BiLSTM std over seeds"] == pytest.approx(0.1)
    assert seeds.loc["pos", "τ_g Average mean over seeds"] == pytest.approx(0.7)
    assert seeds.loc["pos", "τ_g Average seeds"] == 2
    assert list(seeds.index) == ["all", "neg", "pos"]
    assert seeds.loc["all", "τ_g BiLSTM mean over seeds"] == pytest.approx(0.35)  # (0.25 + 0.45) / 2


def ff_summary(seed_shift: float) -> dict:
    """``ff/...`` keys: method i has comprehensiveness 0.1·(i+1) (+ shift), sufficiency 0.5 − 0.05·i."""
    out = {"ff/n_instances": 50, "test/acc": 0.9}
    for i, method in enumerate(("attention", "gradient", "loo", "random")):
        for path, value in (
            ("comprehensiveness/aopc", 0.1 * (i + 1) + seed_shift),
            ("sufficiency/aopc", 0.5 - 0.05 * i),
            ("auprc", 0.9 - 0.2 * i),
            ("token_f1", 0.8 - 0.2 * i),
        ):
            out.update(
                {
                    f"ff/{method}/{path}/mean": value,
                    f"ff/{method}/{path}/ci_low": value - 0.01,
                    f"ff/{method}/{path}/ci_high": value + 0.01,
                }
            )
        for k in (1, 5, 10, 20, 50):
            for name in ("comprehensiveness", "sufficiency"):
                out.update({f"ff/{method}/{name}/k{k}/{s}": 0.01 * k * (i + 1) for s in ("mean", "ci_low", "ci_high")})
    return out


def test_faithfulness_table_ranks_methods_and_compares_seeds(tmp_path):
    root = tmp_path / "ff"
    make_run(root, "one", dataset="synthetic", encoder="lstm", summary=ff_summary(0.0), family="faithfulness")
    for seed, shift in ((1, 0.0), (2, 0.01), (3, -0.01)):
        make_run(
            root,
            f"avg-{seed}",
            dataset="synthetic",
            encoder="average",
            seed=seed,
            summary=ff_summary(shift),
            family="faithfulness",
        )
    out = build_report(root)
    numbers = pd.read_csv(out / "ff_methods.csv")
    assert len(numbers) == 4 * 4  # (1 + 3 runs) × 4 methods
    shown = (out / "ff_methods.md").read_text()
    assert "| synthetic | lstm + additive (softmax) | loo | 1 | 0.300 [0.290, 0.310] | 2 |" in shown
    rows = [r for r in shown.splitlines() if "average" in r]
    gradient = next(r for r in rows if "| gradient |" in r)
    assert "0.200 ± 0.008" in gradient and "beyond seed spread (p = 0.10)" in gradient
    lstm_rows = [r for r in shown.splitlines() if "lstm" in r]
    # ranks: comprehensiveness descending (loo 3rd of 4 by value 0.3 → rank 2), sufficiency ascending
    assert next(r for r in lstm_rows if "| random |" in r).split("|")[6].strip() == "1"
    assert (out / "ff_curves.png").is_file()


def test_rows_are_labelled_by_model_differences_not_by_analysis_options(tmp_path):
    """Runs that ran other analyses are not labelled by 20–40 ``analysis.*=None`` settings; sparsegen's λ, the
    training variant and an adversary's λ label every row they apply to, so no two rows look identical."""
    root = tmp_path / "labels"
    make_run(root, "a", dataset="sst", encoder="lstm", summary=jw_summary(0.3, 0.8))
    make_run(
        root,
        "b",
        dataset="sst",
        encoder="lstm",
        seed=14,
        summary=jw_summary(0.3, 0.8),
        settings={"analysis.sparsity.heatmaps": 4, "analysis.sparsity.tests": ["input"]},
    )
    for lam in (-1.0, 0.5):
        make_run(
            root,
            f"sg{lam}",
            dataset="sst",
            encoder="lstm",
            projection="sparsegen",
            lam=lam,
            summary=jw_summary(0.3, 0.8),
        )
    make_run(
        root,
        "iw",
        dataset="sst",
        encoder="cnn",
        summary=jw_summary(0.3, 0.8),
        settings={"training.schedule": "standard", "training.instance_weighting": True},
    )
    make_run(
        root,
        "adv",
        dataset="sst",
        encoder="cnn",
        summary=jw_summary(0.3, 0.8),
        settings={"training.schedule": "model_consistent_adversary", "training.lam": 0.5},
    )
    out = build_report(root)
    accuracy = pd.read_csv(out / "accuracy.csv").fillna("")
    assert sorted(accuracy["variant"]) == [
        "",
        "",
        "instance_weighting",
        "model_consistent_adversary λ=0.5",
        "λ=-1",
        "λ=0.5",
    ]
    assert not any("analysis." in v for v in pd.read_csv(out / "runs.csv")["variant"].fillna(""))


def test_an_infinite_ratio_is_infinity_and_tiny_p_values_are_not_zero(tmp_path):
    """S&S's gradient/attention ratio is ∞ when attention is never sooner (the run records it as null with
    the reason "inf"); a p-value of 1e-9 prints as 1.0e-09; CSV cells are numbers (mean, low, high apart)."""
    root = tmp_path / "ss"
    summary = {
        "ss/n_instances": 10,
        "ss/multi/n": 10,
        "ss/multi/grad_vs_attn_ratio": None,
        "ss/multi/grad_vs_attn_sign_p": 1e-9,
        "undefined": {"ss/multi/grad_vs_attn_ratio": "inf"},
    }
    for ranking in ("attention", "gradient"):
        summary |= {f"ss/multi/{ranking}/never_flip": 0, f"ss/multi/{ranking}/never_flip_frac": 0.0}
        summary |= {
            f"ss/multi/{ranking}/frac_removed/{k}": v
            for k, v in (("median", 0.3), ("mean", 0.416), ("ci_low", 0.322), ("ci_high", 0.509))
        }
    make_run(root, "gru", dataset="yelp", encoder="gru", summary=summary, family="serrano_smith")
    out = build_report(root)
    md = (out / "ss_fraction_removed.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| yelp") and "| attention | 10 |" in line)
    assert "| ∞ | 1.0e-09 |" in row and "0.416 [0.322, 0.509]" in row and "0.000 |" not in row.split("∞")[1]
    assert r"$\infty$ & 1.0e-09" in (out / "ss_fraction_removed.tex").read_text()
    csv = pd.read_csv(out / "ss_fraction_removed.csv").set_index("ranking")
    assert csv.loc["attention", "gradient sooner / attention sooner"] == np.inf
    assert csv.loc[
        "attention", ["mean frac removed", "mean frac removed ci_low", "mean frac removed ci_high"]
    ].tolist() == [0.416, 0.322, 0.509]
    assert str(csv["n"].dtype) == "int64"
    # without the recorded reason, the ratio comes from the two shares: attention never sooner → ∞
    del summary["undefined"]
    summary |= {"ss/multi/grad_faster_than_attn": 0.4, "ss/multi/attn_faster_than_grad": 0.0}
    (root / "gru" / "summary.json").write_text(json.dumps(summary))
    out = build_report(root)
    assert pd.read_csv(out / "ss_fraction_removed.csv").iloc[0]["gradient sooner / attention sooner"] == np.inf


def test_per_class_rows_name_the_classes_and_show_n_with_a_class_never_predicted(tmp_path):
    """A class the model never predicted gets n = 0 and — (the caption says why), not a silent row of —;
    class names come from the run (status.json's labels, else the config's data.labels, else "class k")."""
    root = tmp_path / "classes"
    summary = jw_summary(0.3, 0.8)
    summary = {k: v for k, v in summary.items() if "class_1" not in k}  # the BiLSTM never predicted class 1
    run = make_run(root, "lstm", dataset="sst", encoder="lstm", summary=summary)
    make_run(root, "avg", dataset="sst", encoder="average", summary=jw_summary(0.6, 0.7))
    out = build_report(root)
    table = pd.read_csv(out / "table2_additive-softmax.csv").set_index("class")
    assert table.loc["pos", "tau_g_bilstm_n"] == 0 and np.isnan(table.loc["pos", "tau_g_bilstm_mean"])
    assert table.loc["pos", "tau_g_average_n"] == 10 and str(table["tau_g_bilstm_n"].dtype) == "int64"
    md = (out / "table2_additive-softmax.md").read_text()
    assert "| pos | — | — | 0 |" in md and "the model predicted no instance of that class" in md
    # labels from the config when the status has none; "class k" when neither has them
    shutil.rmtree(root / "avg")
    write_json_atomic(run / "status.json", {"state": "complete", "finished": 1.0e9})
    config = OmegaConf.load(run / ".hydra" / "config.yaml")
    config.data = {"labels": ["bad", "good"]}
    OmegaConf.save(config, run / ".hydra" / "config.yaml")
    assert list(pd.read_csv(build_report(root) / "table2_additive-softmax.csv")["class"]) == ["all", "bad", "good"]
    del config["data"]
    OmegaConf.save(config, run / ".hydra" / "config.yaml")
    assert list(pd.read_csv(build_report(root) / "table2_additive-softmax.csv")["class"]) == ["all", "class 0"]


def test_permutation_and_adversary_results_across_runs(sweep):
    out = build_report(sweep)
    assert not (out / "jw_permutation_adversarial.csv").exists()  # no run has them
    for name in ("sst-lstm", "imdb-lstm"):
        path = sweep / name / "summary.json"
        summary = json.loads(path.read_text()) | {"jw/n_instances": 20}
        for cls, shift in ((None, 0.0), (0, 0.1), (1, 0.2)):
            part = "" if cls is None else f"class_{cls}/"
            summary |= {f"jw/perm/median_tvd/{part}{k}": 0.01 + shift for k in ("mean", "ci_low", "ci_high")}
            if name == "imdb-lstm":  # tests=[correlation, permutation]: no adversary
                continue
            summary |= {f"jw/adv/emax_jsd/{part}{k}": 0.3 + shift for k in ("mean", "ci_low", "ci_high")}
            summary |= {f"jw/adv/emax_jsd/{part}frac_above_0.5": 0.25, f"jw/adv/{part}none_feasible_frac": 0.05}
        path.write_text(json.dumps(summary))
    out = build_report(sweep)
    table = pd.read_csv(out / "jw_permutation_adversarial.csv")
    sst = table[table["dataset"] == "sst"].set_index("class")
    assert list(sst.index) == ["all", "neg", "pos"] and list(sst["n"]) == [20, 10, 10]
    assert sst.loc["pos", "adv_jsd_mean"] == pytest.approx(0.5) and sst.loc["all", "perm_tvd_mean"] == 0.01
    assert list(sst["adv_jsd_above_0.5"]) == [0.25] * 3 and list(sst["no_adversary"]) == [0.05] * 3
    imdb = table[table["dataset"] == "imdb"].set_index("class")
    assert imdb.loc["pos", "perm_tvd_mean"] == pytest.approx(0.21)
    adversary = ["adv_jsd_mean", "adv_jsd_ci_low", "adv_jsd_ci_high", "adv_jsd_above_0.5", "no_adversary"]
    assert imdb[adversary].isna().all().all()  # not run: empty, never a placeholder
    assert "0.500 [0.500, 0.500]" in (out / "jw_permutation_adversarial.md").read_text()


def test_a_constant_attention_gets_one_line_not_an_empty_figure(tmp_path):
    """attention=uniform: τ is undefined for every instance; the report says so in one line, draws no
    'mean +nan' boxes and raises no numpy warning."""
    root = tmp_path / "uniform"
    summary = jw_summary(0.3, 0.8)
    summary = {
        k: (np.nan if "/tau_" in f"/{k.split('/', 1)[1]}" and k.endswith(("mean", "std")) else v)
        for k, v in summary.items()
    } | {"jw/tau_grad/n": 0, "jw/dropped/tau_grad/constant_attention": 20}
    frame = jw_instances(0).assign(tau_grad=np.nan, tau_loo=np.nan)
    make_run(
        root,
        "uniform",
        dataset="sst",
        encoder="lstm",
        attention="uniform",
        summary={k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in summary.items()},
        instances=frame,
    )
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        out = build_report(root)
    page = (out / "index.html").read_text()
    assert "Kendall τ is undefined for a constant attention" in page
    assert not list(out.glob("fig3_*")) and not list(out.glob("table2_uniform*"))


def test_per_run_figures_are_thumbnails_linking_to_the_full_png(sweep):
    from matplotlib.figure import Figure

    folder = sweep / "sst-lstm" / "analysis" / "jain_wallace"
    fig = Figure(figsize=(8, 6))
    fig.add_subplot().plot([0, 1])
    fig.savefig(folder / "fig2_tau_grad_by_class.png", dpi=100)
    (folder / "heatmaps.html").write_text("<html></html>")
    out = build_report(sweep)
    page = (out / "index.html").read_text()
    section = page[page.index("Per-run figures") :]
    link = re.search(
        r"<a class='thumb' href='([^']+)'[^>]*>"
        r"<img alt=\"fig2_tau_grad_by_class.png\" src=\"data:image/png;base64,([^\"]+)\"",
        section,
    )
    assert link and (out / link.group(1)).resolve() == (folder / "fig2_tau_grad_by_class.png").resolve()
    import base64
    import io

    from PIL import Image

    assert Image.open(io.BytesIO(base64.b64decode(link.group(2)))).width <= 220  # shrunk, not the 800 px original
    assert "heatmaps.html</a>" in section


def test_counts_are_integers_and_tiny_numbers_are_not_zero():
    from attn_study.report.render import format_number, format_p, with_integer_counts

    frame = with_integer_counts(pd.DataFrame({"n": [10.0, np.nan], "tau_g_n": [3.0, 4.0], "mean": [1.0, 2.0]}))
    assert str(frame["n"].dtype) == "Int64" and str(frame["tau_g_n"].dtype) == "Int64" and frame["mean"].dtype == float
    assert markdown(frame) == "| n | tau_g_n | mean |\n|---|---|---|\n| 10 | 3 | 1.000 |\n| — | 4 | 2.000 |\n"
    assert format_number(4e-4) == "< 0.001" and format_number(-4e-4) == "> −0.001"  # never scientific notation
    assert format_number(0.0) == "0.000" and format_number(-np.inf) == "−∞" and format_number(5e-4) == "0.001"
    assert format_p(1.1e-9) == "1.1e-09" and format_p(0.0123) == "0.012"
    assert markdown(pd.DataFrame({"p pooled": [1e-9], "x": [np.inf]})).splitlines()[-1] == "| 1.0e-09 | ∞ |"


def test_table1_averages_each_statistic_over_the_seeds_of_a_cell():
    """Two seeds of one cell: the means, the stds and the (instance, p) pair statistics are each averaged."""
    from attn_study.families.sparsity.report import table1_display

    frame = pd.DataFrame(
        {
            "model": ["lstm + additive"] * 2,
            "projection": ["sparsemax"] * 2,
            "dataset": ["sst"] * 2,
            "mean": [0.87, 0.89],
            "ci_low": [np.nan] * 2,
            "ci_high": [np.nan] * 2,
            "std": [0.04, 0.06],
            "n": [10, 10],
            "pairs mean": [0.86, 0.90],
            "pairs std": [0.08, 0.12],
        }
    )
    (cell,) = table1_display(frame)["sst"]
    assert cell == "0.880 ± 0.050 (seeds: 2, spread 0.010); over (instance, p): 0.880 ± 0.100"
