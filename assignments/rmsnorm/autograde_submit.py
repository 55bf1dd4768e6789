"""Hand in a notebook for practice grading from a terminal on the course's JupyterHub (the students' service,
`autograde serve`): no hidden checks here, no answers; the service grades.

Students get this file as autograde_submit.py next to each notebook (with check_notebook.py) and run, in the
terminal of their own Jupyter server:

    python autograde_submit.py rmsnorm.ipynb

Who hands in is the hub's answer, from the token of the student's own server ($JUPYTERHUB_API_TOKEN, set by
JupyterHub); the service's address comes from $AUTOGRADE_SERVICE_URL (the course's hub sets it for every server)
or --url. It waits for the verdict and prints the score and the address of the report. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

WAIT_SECONDS = 600


def _request(url: str, token: str, data: bytes | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET",
                                     headers={"Authorization": f"token {token}",
                                              "Content-Type": "application/x-ipynb+json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read().decode("utf-8"))
    except urllib.error.HTTPError as error:
        try:
            return error.code, json.loads(error.read().decode("utf-8"))
        except ValueError:
            return error.code, {"message": f"评分服务返回了错误 {error.code}"}


def main(argv: list[str] | None = None, echo=print) -> int:
    parser = argparse.ArgumentParser(description="提交笔记本做练习评分（不是最终成绩）")
    parser.add_argument("notebook", type=Path, help="要提交的笔记本，例如 rmsnorm.ipynb")
    parser.add_argument("--assignment", help="作业名（默认：笔记本的文件名，例如 rmsnorm）")
    parser.add_argument("--url", default=os.environ.get("AUTOGRADE_SERVICE_URL", ""),
                        help="评分服务的地址（默认：$AUTOGRADE_SERVICE_URL）")
    parser.add_argument("--no-wait", action="store_true", help="提交后不等结果")
    args = parser.parse_args(argv)
    token = os.environ.get("JUPYTERHUB_API_TOKEN", "")
    if not token:
        echo("没有找到 JupyterHub 的令牌（$JUPYTERHUB_API_TOKEN）：请在课程 JupyterHub 上你自己的服务器的终端里运行")
        return 2
    if not args.url:
        echo("不知道评分服务的地址：请老师设置 $AUTOGRADE_SERVICE_URL，或者加上 --url")
        return 2
    try:
        content = args.notebook.read_bytes()
    except OSError as error:
        echo(f"无法读取 {args.notebook}：{error.strerror}")
        return 2
    base = args.url.rstrip("/") + "/"
    query = urllib.parse.urlencode({"assignment": args.assignment or args.notebook.stem,
                                    "filename": args.notebook.name})
    try:
        status, answer = _request(f"{base}api/attempts?{query}", token, content)
    except (urllib.error.URLError, OSError) as error:
        echo(f"连不上评分服务（{base}）：{getattr(error, 'reason', error)}")
        return 1
    if status != 202:
        echo(f"没有提交：{answer.get('message', status)}")
        return 1
    echo(f"已提交（第 {answer['number']} 次练习），排队中：前面还有 {answer['position']} 份。")
    if args.no_wait:
        echo(f"结果：{answer['url']}")
        return 0
    deadline = time.monotonic() + WAIT_SECONDS
    while answer.get("state") in ("queued", "grading") and time.monotonic() < deadline:
        time.sleep(2)
        status, answer = _request(f"{base}api/attempts/{answer['id']}", token)
        if status != 200:
            echo(f"查询结果失败：{answer.get('message', status)}")
            return 1
    if answer.get("state") == "graded":
        echo(f"练习得分：{answer['score']:g} / {answer['max_score']:g}（不是最终成绩）。报告：{answer['url']}")
        return 0
    if answer.get("state") == "refunded":
        echo(answer.get("message") or "这次没能评分，不计入次数")
        return 1
    echo(f"还没评完，稍后在这里看结果：{answer['url']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
