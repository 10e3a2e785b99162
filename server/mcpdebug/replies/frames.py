"""Replies that inspect frames (seed 002's shapes), of a stored snapshot or a live session alike."""

from __future__ import annotations

from pydantic import BaseModel, Field

from mcpdebug.replies.base import Data


class StackFrame(BaseModel):
    id: int = Field(description="frame_id for the other tools; 0 is the raise point")
    name: str
    file: str
    line: int
    column: int = 1
    library: bool = False
    thread: str | None = None


class FrameRef(BaseModel):
    id: int
    name: str
    file: str
    line: int
    thread: str | None = None


class Stack(Data):
    success: bool = True
    session: str | None = None
    test: str | None = None
    phase: str | None = None
    exception: str | None = None
    stackFrames: list[StackFrame]
    count: int
    libraryFramesHidden: int | None = None
    message: str | None = Field(default=None, description="why the stack is empty")


class Scope(BaseModel):
    name: str
    variablesReference: int
    expensive: bool = False
    count: int | None = Field(default=None, description="its variables (a debug session does not count)")


class Scopes(Data):
    success: bool = True
    session: str | None = None
    scopes: list[Scope]
    frame: FrameRef


class Variable(BaseModel):
    name: str
    value: str
    type: str
    variablesReference: int = Field(description="0: nothing to expand; else pass it to get_variables")


class Variables(Data):
    success: bool = True
    session: str | None = None
    variables: list[Variable]
    count: int
    notShown: int | None = None
    frame: FrameRef | None = None
    scopeName: str | None = None


class SourceLine(BaseModel):
    line: int
    content: str


class SourceContext(Data):
    success: bool = True
    file: str
    line: int
    lineContent: str
    surrounding: list[SourceLine]
    note: str


class Evaluation(Data):
    success: bool = True
    session: str
    result: str = Field(description="the value's repr (long values are cut)")
    type: str
    variablesReference: int
    frame: FrameRef | None = None
    output: str | None = Field(default=None, description="what the code printed")
